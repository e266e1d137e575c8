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
