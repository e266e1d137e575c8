"""The docs page "What each engine applies" lists every engine rule as the engines' tables say."""

from pathlib import Path

from softmax_scale.engines import engine_rules, rules_markdown

PAGE = Path(__file__).resolve().parents[2] / "docs" / "engines.md"


def test_the_page_table_is_the_rules_tables():
    text = PAGE.read_text(encoding="utf-8")
    block = text[text.index("<!-- rules:start -->\n") + len("<!-- rules:start -->\n"):text.index("<!-- rules:end -->")]
    assert block == rules_markdown()


def test_every_rule_and_commit_is_on_the_page():
    text = PAGE.read_text(encoding="utf-8")
    for engine, rule in engine_rules():
        assert f"| {engine} | `{rule.name}` |" in text
        assert rule.commit == "" or rule.commit in text


def test_the_worked_example_is_the_commands_real_output(tmp_path, capsys, monkeypatch):
    """The page opens with a config, a command and its output: the output is what the command prints today."""
    import re
    import shlex

    from softmax_scale.cli import main

    text = PAGE.read_text(encoding="utf-8")
    example = text[text.index("## A worked example"):text.index("## How to set the factor in each engine")]
    config = re.search(r"```json\n(.*?)```", example, re.S).group(1)
    command, printed = re.search(r"```text\n\$ (.*?)\n(.*?)```", example, re.S).groups()
    argv = shlex.split(command)
    assert argv[:2] == ["softmax-scale", "engines"]
    (tmp_path / argv[2]).write_text(config, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(argv[1:]) == 0
    assert capsys.readouterr().out == printed
