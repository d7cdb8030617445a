"""Builds the one C extension (the incremental BPE hot loop); everything else is in pyproject."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "app.tokenization.incremental_bpe._core",
            ["app/tokenization/incremental_bpe/_core.c"],
            extra_compile_args=["-O3", "-g", "-std=c11"],
        )
    ]
)
