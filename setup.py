"""Installable package for tracr-compile: RASP programs compiled to transformer weights."""

from setuptools import find_packages, setup

PACKAGES = ("rasp", "craft", "compiler", "constructions", "compression")

setup(
    name="tracr-compile",
    version="0.1.0",
    description=(
        "Compile RASP programs into exact, inspectable JAX/Haiku transformers; "
        "build superposition constructions and compress compiled models."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=[p for name in PACKAGES for p in (name, f"{name}.*")]),
    # Tested together on a fresh Python 3.11 venv (see README, "Versions").  dm-haiku 0.0.17
    # is the release that runs on the JAX 0.10 line; older Haiku releases break on newer JAX.
    install_requires=[
        "jax>=0.10.0,<0.11",
        "jaxlib>=0.10.0,<0.11",
        "dm-haiku>=0.0.17,<0.0.18",
        "optax>=0.2.8,<0.3",
        "networkx>=3.4,<4",
        "numpy>=2.0,<3",
        "matplotlib>=3.9,<4",
        "safetensors>=0.6,<1",
        "tqdm>=4.66,<5",
        # compiler.allocate.milp_schedule: the exact layer allocator (HiGHS MILP). JAX already
        # depends on scipy; listed because the compiler imports it directly.
        "scipy>=1.11,<2",
    ],
    extras_require={
        "dev": ["pytest>=8,<10"],
    },
    entry_points={"console_scripts": ["tracr-compile=compiler.cli:main"]},
)
