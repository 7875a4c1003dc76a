from support import example_model
m = example_model("sort_unique")
for i, b in enumerate(m.sublayers):
    print(i, type(b).__name__)
    if type(b).__name__ == "MLP":
        print("  hidden", len(b.first.output_space.basis), [str(x) for x in b.first.output_space.basis][:5], m.config.layers[i].w_in.shape)
    elif b is not None:
        for h in getattr(b, "heads", lambda: [])() if callable(getattr(b,"heads",None)) else getattr(b,"heads",[]):
            print("  head", type(h).__name__, h.w_qk.matrix.shape, h.w_ov.matrix.shape)
        print("  spec", [(hs.w_q.shape, hs.w_v.shape) for hs in m.config.layers[i].heads])
