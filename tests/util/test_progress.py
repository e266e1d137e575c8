"""The progress bar's plain lines (standard error not a terminal): each state printed once."""

import io

from softmax_scale._util.progress import progress_bar


def _lines(**kwargs) -> list[str]:
    stream = io.StringIO()
    bar = progress_bar(file=stream, desc="tasks", **kwargs)
    for _ in range(kwargs["total"] - kwargs.get("initial", 0)):
        bar.update()
    bar.close()
    return [line.split("|")[-1].split()[0] for line in stream.getvalue().splitlines()]


def test_a_bar_prints_its_start_and_its_end():
    assert _lines(total=3) == ["0/3", "3/3"]


def test_a_bar_that_starts_complete_prints_one_line():
    """A resumed run with nothing left to do (``initial == total``) says ``1/1`` once, not at start and again at close."""
    assert _lines(total=1, initial=1) == ["1/1"]
