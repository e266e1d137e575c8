"""``advise --evidence/--model``: a bad ``measure`` file or model file is refused naming it, and what is left out is said.

Each file here is a valid ``measure`` result written by hand in its format (a header with ``L``
and the head dimension, its columns), with one line changed; the line numbers are counted here
from the lines written, independently of the reader.
"""

import json

import pytest

import softmax_scale as ss
from softmax_scale import cli
from softmax_scale.experiments.measure import COLUMNS

L, N = 1024, 2048
HEADER = [f"# train_length: {L}", "# head_dim: 64", "# model: toy.gguf", "# model_sha256: " + "ab" * 32,
          "# rope: yarn", "# recipe: yarn s = 2 at L = 1024, llama.cpp's multiplier"]


def _row(task, n, item, scheme, factor, loss, retrieved="", applied=None):
    depth = "0.5" if task == "passkey" else ""
    return ",".join(map(str, (task, n, item, scheme, factor, "yarn", depth, loss, retrieved,
                              factor if applied is None else applied, 5, 1.0)))


def _lines(docs=4, prompts=0, n=N, cells=(("constant", 1.0), ("constant", 1.1), ("recipe", 1.07))):
    """The lines of a valid file: cell k of document j reads loss 2 + 0.01 (j + k); prompt j retrieves when j is even."""
    out = [*HEADER, ",".join(COLUMNS)]
    for j in range(docs):
        out += [_row("loss", n, f"doc#{j}", s, f, 2 + 0.01 * (j + k)) for k, (s, f) in enumerate(cells)]
    for j in range(prompts):
        out += [_row("passkey", n, f"d0.5-k{j}", s, f, 3.0, float(j % 2 == 0)) for s, f in cells]
    return out


def _file(tmp_path, lines, name="m.csv"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _header(key, value):
    lines = _lines()
    k = next(i for i, line in enumerate(lines) if line.startswith(f"# {key}:"))
    lines[k] = f"# {key}: {value}"
    return lines, k + 1


def _cell(column, value, task="loss", k=None):
    """A valid file with one cell of the row changed (the first of ``task`` past the column row, or line ``k``)."""
    lines = _lines(prompts=4)
    k = k if k is not None else next(i for i, line in enumerate(lines) if line.startswith(task + ","))
    cells = lines[k].split(",")
    cells[COLUMNS.index(column)] = value
    lines[k] = ",".join(cells)
    return lines, k + 1


# -- the header --------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value"), [("train_length", "0"), ("train_length", "1"), ("train_length", "abc"),
                                            ("head_dim", "abc"), ("head_dim", "-64"), ("head_dim", "0")])
def test_a_header_integer_out_of_range_is_refused_naming_the_file_line_and_key(tmp_path, key, value):
    lines, number = _header(key, value)
    path = _file(tmp_path, lines)
    with pytest.raises(ValueError, match=rf"`evidence`: .*m\.csv line {number}: the header's `{key}` must be an "
                                         rf"integer >= 2, got '{value}'"):
        ss.advise(n=N, evidence=path)


def test_a_header_without_train_length_is_refused(tmp_path):
    lines = [line for line in _lines() if not line.startswith("# train_length")]
    with pytest.raises(ValueError, match=r"`evidence`: .*m\.csv has no `train_length` in its header"):
        ss.advise(n=N, evidence=_file(tmp_path, lines))


def test_a_bad_header_head_dim_is_refused_even_with_d_given(tmp_path):
    # the file is at fault, not a `d` the user passed
    lines, number = _header("head_dim", "-64")
    with pytest.raises(ValueError, match=rf"line {number}: the header's `head_dim`"):
        ss.advise(d=64, n=N, evidence=_file(tmp_path, lines))


# -- the rows ----------------------------------------------------------------------------------

BAD_CELLS = [
    ("loss", "-5", "loss", "a loss in nats must be a finite number >= 0"),
    ("loss", "nan", "loss", "a loss in nats must be a finite number >= 0"),
    ("loss", "", "loss", "a loss in nats must be a finite number >= 0"),
    ("loss", "inf", "loss", "a loss in nats must be a finite number >= 0"),
    ("retrieved", "7", "passkey", "keys retrieved must be 0 or 1"),
    ("retrieved", "0.5", "passkey", "keys retrieved must be 0 or 1"),
    ("retrieved", "", "passkey", "keys retrieved must be 0 or 1"),
    ("factor", "-1.1", "loss", "the factor must be a finite number > 0"),
    ("factor", "0", "loss", "the factor must be a finite number > 0"),
    ("factor_mean", "inf", "loss", "the factor mean must be a finite number > 0"),
    ("task", "lose", "loss", "the task must be loss or passkey"),
    ("length", "1", "loss", "the length must be an integer >= 2"),
    ("item", "", "loss", "the item must be named"),
    ("scheme", " ", "loss", "the scheme must be named"),
]


@pytest.mark.parametrize(("column", "value", "task", "rule"), BAD_CELLS)
def test_a_row_out_of_range_is_refused_naming_the_file_line_and_column(tmp_path, column, value, task, rule):
    lines, number = _cell(column, value, task)
    path = _file(tmp_path, lines)
    with pytest.raises(ValueError, match=rf"`evidence`: .*m\.csv line {number}, column `{column}`: {rule}, "
                                         rf"got '{value}'"):
        ss.advise(n=N, evidence=path, task="retrieval" if task == "passkey" else "lm")


def test_a_cell_given_twice_is_refused_naming_both_lines(tmp_path):
    lines = _lines()
    first = next(i for i, line in enumerate(lines) if line.startswith("loss,") and ",1.1," in line)
    lines.append(lines[first].replace(",2.0", ",2.5"))  # the same cell, another loss, last in the file
    with pytest.raises(ValueError, match=rf"m\.csv line {len(lines)} repeats the cell of line {first + 1} \(task loss, "
                                         rf"length {N}, item doc#0, constant x1.1\): one row per cell"):
        ss.advise(n=N, evidence=_file(tmp_path, lines))


def test_the_same_cell_written_with_another_factor_spelling_is_a_repeat(tmp_path):
    lines = _lines()
    first = next(i for i, line in enumerate(lines) if line.startswith("loss,") and ",1.1," in line)
    lines.append(lines[first].replace(",1.1,", ",1.10,", 1))
    with pytest.raises(ValueError, match=rf"repeats the cell of line {first + 1}"):
        ss.advise(n=N, evidence=_file(tmp_path, lines))


# -- the command line --------------------------------------------------------------------------

CLI_CASES = {
    "train_length": (lambda: _header("train_length", "0"), "the header's `train_length`"),
    "head_dim": (lambda: _header("head_dim", "abc"), "the header's `head_dim`"),
    "retrieved": (lambda: _cell("retrieved", "7", "passkey"), "column `retrieved`"),
    "loss": (lambda: _cell("loss", "-5"), "column `loss`"),
    "factor": (lambda: _cell("factor", "-1.1"), "column `factor`"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_the_command_exits_2_with_one_line_naming_the_file_line_and_column(tmp_path, capsys, case):
    make, what = CLI_CASES[case]
    lines, number = make()
    path = _file(tmp_path, lines)
    assert cli.main(["advise", "--evidence", str(path), "--n", str(N)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path} line {number}" in err[0] and what in err[0], err


def test_the_command_exits_2_on_a_cell_given_twice(tmp_path, capsys):
    lines = _lines()
    lines.append(lines[len(HEADER) + 2].replace(",2.0", ",2.5"))
    assert cli.main(["advise", "--evidence", str(_file(tmp_path, lines)), "--n", str(N)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"line {len(lines)} repeats the cell of line {len(HEADER) + 3}" in err[0], err


def test_model_on_a_text_file_or_a_folder_says_so(tmp_path, capsys):
    text = tmp_path / "notes.txt"
    text.write_text("hello,world\n1,2\n", encoding="utf-8")
    fake = tmp_path / "fake.gguf"
    fake.write_text("hello\n", encoding="utf-8")
    for model, said in ((text, "is not a GGUF file"), (fake, "is not a GGUF file"), (tmp_path, "is a folder, not a GGUF file")):
        assert cli.main(["advise", "--n", str(N), "--model", str(model)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"`--model`: {model} {said}" in err[0], err
    with pytest.raises(ValueError, match=r"`evidence`: .*fake\.gguf is not a GGUF file"):
        ss.advise(n=N, evidence=fake)
    with pytest.raises(ValueError, match=r"`evidence`: .* is a folder, not a result file"):
        ss.advise(n=N, evidence=tmp_path)


# -- what contributes nothing is said ----------------------------------------------------------

def test_a_file_without_rows_says_it_contributes_nothing(tmp_path, capsys):
    path = _file(tmp_path, _lines(docs=0))
    a = ss.advise(n=N, evidence=path)
    assert "Your measurement (m.csv): m.csv has no rows: it contributes nothing." in a.scope
    assert any(line.startswith("Your measurement (m.csv) gives no comparison on language modelling") for line in a.scope)
    assert all(c.experiment != "measure (your model)" for c in a.comparisons)
    assert cli.main(["advise", "--evidence", str(path), "--n", str(N), "--json"]) == 0
    assert any("has no rows" in line for line in json.loads(capsys.readouterr().out)["scope"])


def test_rows_at_the_training_length_say_they_contribute_nothing(tmp_path, capsys):
    path = _file(tmp_path, _lines(docs=3, n=L))
    a = ss.advise(n=N, evidence=path)
    said = [line for line in a.scope if line.startswith("Your measurement")]
    assert f"Your measurement (m.csv): 9 loss rows at n <= L = {L:,} (n = {L:,}) contribute nothing: advise compares " \
           "past L." in said
    assert any("gives no comparison on language modelling" in line for line in said)
    assert cli.main(["advise", "--evidence", str(path), "--n", str(N)]) == 0
    assert "9 loss rows at n <= L" in " ".join(capsys.readouterr().out.split())


def test_a_length_without_a_reference_cell_says_so(tmp_path):
    path = _file(tmp_path, _lines(cells=(("constant", 1.1), ("constant", 1.2))))
    said = [line for line in ss.advise(n=N, evidence=path).scope if line.startswith("Your measurement")]
    assert any(f"the loss rows at n = {N:,} have no `recipe` cell and no `constant x1` cell" in line for line in said)


def test_a_document_missing_from_one_cell_is_said(tmp_path):
    lines = [line for line in _lines(docs=4) if not (line.startswith("loss,") and ",doc#2,constant,1.1," in line)]
    a = ss.advise(n=N, evidence=_file(tmp_path, lines))
    assert any("constant x1.1 at n = 2,048 is paired with the recipe cell on 3 of 4 documents: no row of doc#2" in line
               for line in a.scope)
    own = next(c for c in a.comparisons if c.experiment == "measure (your model)" and c.scale == "constant x1.1 at test")
    assert len(own.seeds) == 3


def test_a_cell_that_retrieves_the_same_keys_as_the_recipe_is_still_compared(tmp_path):
    # constant x1.1 retrieves every key the recipe does, under another factor: a tie, not the recipe itself
    a = ss.advise(n=N, evidence=_file(tmp_path, _lines(docs=2, prompts=6)), task="retrieval")
    own = {c.scale: c for c in a.comparisons if c.experiment == "measure (your model)"}
    assert own["constant x1.1 at test"].effect == 0 and own["constant x1.1 at test"].p == 1
    assert own["constant x1.1 at test"].seeds == tuple(range(6))


def test_the_recipe_s_own_reading_under_another_name_is_said_and_not_compared(tmp_path):
    # constant 1 reads exactly what a recipe of s = 1 reads, with the same mean factor: the same cell twice
    lines = [*HEADER, ",".join(COLUMNS)]
    for j in range(3):
        lines += [_row("loss", N, f"doc#{j}", "constant", 1.0, 2 + 0.01 * j),
                  _row("loss", N, f"doc#{j}", "constant", 1.1, 1.9 + 0.02 * j),
                  _row("loss", N, f"doc#{j}", "recipe", 1.0, 2 + 0.01 * j)]
    a = ss.advise(n=N, evidence=_file(tmp_path, lines))
    assert any("constant x1 at n = 2,048 is the recipe cell's own reading" in line for line in a.scope)
    own = {c.scale for c in a.comparisons if c.experiment == "measure (your model)"}
    assert own == {"constant x1.1 at test"}
