"""A Hugging Face tokenizer over a compiled model's input vocabulary.

TransformerLens reads strings through a Hugging Face tokenizer (`to_tokens`, `to_str_tokens`,
`model("a b c")`). A compiled model has no text vocabulary of its own, only the token values it
was compiled for, so this module builds one: a `tokenizers` word-level model that maps the text
of every input token to its id (the ids the compiled model's `InputEncoder` uses, BOS and PAD
included), splits input text on whitespace, and puts BOS in front of every sequence. Wrapped in
a `PreTrainedTokenizerFast`, it is the object both TransformerLens lines accept.

Token text is `str(token)`; when two tokens print alike (`1` and `"1"`), every token is shown by
`repr` instead, so the mapping stays one to one. A token whose text contains whitespace can be
decoded but not typed (the whitespace split cuts it). Text naming a word outside the vocabulary
is refused by `tokenizer(text)` (what TransformerLens' `to_tokens` and string inputs call) with
`InvalidInputError`, naming the word, before any id is produced. `tokenizer.encode(text)` maps
such a word to the PAD id instead: TransformerLens probes a tokenizer with `encode("a")` to learn
whether it adds BOS, and that probe must not fail on a vocabulary without `a`.

Needs `transformers` and `tokenizers` (both come with the `export` extra's transformer-lens).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from compiler.errors import InvalidInputError
from compiler.io.export_info import ExportError
from compiler.model.encoders import InputEncoder


def token_texts(encoder: InputEncoder) -> tuple[str, ...]:
    """The text of every input id: the vocabulary in id order, then BOS, then PAD.

    `str(token)` for every token, or `repr(token)` for every token when two `str`s collide.
    Raises `ExportError` when two tokens have the same `repr` too (no text tells them apart).
    """
    tokens: Sequence[Hashable] = (*encoder.vocab, encoder.bos, encoder.pad)
    texts = tuple(str(token) for token in tokens)
    if len(set(texts)) < len(texts):
        texts = tuple(repr(token) for token in tokens)
    if len(set(texts)) < len(texts):
        alike = sorted({text for text in texts if texts.count(text) > 1})
        raise ExportError(
            f"input tokens share the text {alike[0]!r} under both str and repr, so no tokenizer can "
            "tell them apart; give the vocabulary tokens distinct printed forms"
        )
    return texts


class VocabularyTokenizer(PreTrainedTokenizerFast):
    """A `PreTrainedTokenizerFast` whose `__call__` names a word outside the vocabulary instead
    of turning it into an id."""

    def _check_words(self, text: Any) -> None:
        """Raise `InvalidInputError` when `text` (a string or a list of them) holds an unknown word."""
        texts = [text] if isinstance(text, str) else text if isinstance(text, (list, tuple)) else []
        known = self.get_vocab()
        for item in texts:
            if not isinstance(item, str):
                continue
            for word in item.split():
                if word not in known:
                    words = [w for w, _ in sorted(known.items(), key=lambda pair: pair[1])]
                    raise InvalidInputError(
                        f"the word {word!r} in {item!r} is not a token of the compiled model; its "
                        f"tokens are {words} (separate them with spaces)"
                    )

    def __call__(self, text: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._check_words(text)
        return super().__call__(text, *args, **kwargs)


def word_level_tokenizer(texts: Sequence[str], bos_id: int, pad_id: int, max_length: int, name: str,
                         cls: type[PreTrainedTokenizerFast] = PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """A whitespace-split word-level tokenizer whose id `i` is `texts[i]`, putting the text of
    `bos_id` in front of every sequence and padding (right side) with `pad_id`, whose text is
    also the EOS token (nothing appends it). `cls` is the class it is wrapped in: the plain
    `PreTrainedTokenizerFast` is what `AutoTokenizer.from_pretrained` rebuilds from saved files."""
    vocab = {text: index for index, text in enumerate(texts)}
    bos, pad = texts[bos_id], texts[pad_id]
    backend = Tokenizer(models.WordLevel(vocab, unk_token=pad))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, bos_id)]
    )
    return cls(
        tokenizer_object=backend,
        bos_token=bos,
        pad_token=pad,
        eos_token=pad,
        add_bos_token=True,
        padding_side="right",
        model_max_length=max_length,
        name_or_path=name,
    )


def build_tokenizer(encoder: InputEncoder, name: str = "tracr-compile") -> VocabularyTokenizer:
    """The tokenizer of a compiled model's inputs, with the model's ids.

    `tokenizer("3 1 2")["input_ids"] == [bos_id, id(3), id(1), id(2)]`; padding (right side) uses
    the PAD id; `decode` / `batch_decode` give the token texts back. The EOS token is PAD (nothing
    appends it): libraries that insist on an EOS find one inside the vocabulary instead of adding
    an id the model does not have. `name` becomes `name_or_path` (TransformerLens reads it; it is
    never looked up anywhere, because the tokenizer already adds BOS).
    """
    tokenizer = word_level_tokenizer(token_texts(encoder), encoder.bos_id, encoder.pad_id, encoder.max_seq_len + 1,
                                     name, VocabularyTokenizer)
    assert isinstance(tokenizer, VocabularyTokenizer)
    return tokenizer
