"""Builds the C extensions (the incremental BPE hot loop, the native encoder); everything else
is in pyproject."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "app.tokenization.incremental_bpe._core",
            ["app/tokenization/incremental_bpe/_core.c"],
            extra_compile_args=["-O3", "-g", "-std=c11"],
        ),
        Extension(
            "app._json_spans",
            ["app/_json_spans.c"],
            extra_compile_args=[
                "-O3", "-g", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"
            ],
        ),
        Extension(
            "app.tokenization.native._native",
            [
                f"app/tokenization/native/{name}.c"
                for name in ("_native", "survey", "scan", "bpe", "added", "strings")
            ],
            depends=["app/tokenization/native/native.h"],
            extra_compile_args=[
                "-O3", "-g", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"
            ],
        ),
    ]
)
