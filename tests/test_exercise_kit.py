"""The exercise machinery: feedback statuses and rendering, and student-copy rewriting."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from fresh_exercises import fresh_exercises  # noqa: F401 - autouse: variant 0 per test
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from harness.nbrun import cell_errors
from labkit.docs.nbfiles import make_student_copies, studentize_source
from labkit.exercises.kit import BLANK, Exercise, Feedback, Wrong, ____, learner_call


def _checker(answer: object) -> str | None:
    if answer == "boom":
        raise RuntimeError("kaboom")  # stands for a bug in the checker, not in the answer
    if callable(answer):
        answer = learner_call("your function", answer)
    if answer != 42:
        raise Wrong(f"{answer!r} is not the answer")
    return "the answer."


EX = Exercise("Life", "What is it?", _checker, ("a number", "six times seven"), "42")


def test_statuses() -> None:
    assert EX.check(42).passed and str(EX.check(42)) == "✓ Correct: Life: the answer."
    assert str(EX.check(41)) == "✗ Not yet: Life: 41 is not the answer"
    assert EX.check(____).status == "not_attempted" and EX.check().status == "not_attempted"
    assert ____ is BLANK and repr(____) == "____"


def test_only_the_learners_code_is_blamed() -> None:
    with pytest.raises(RuntimeError, match="kaboom"):  # a checker bug is a real error
        EX.check("boom")
    fb = EX.check(lambda: {}["k"])
    assert fb.status == "incorrect" and fb.message == "Life: your function raised KeyError: 'k'"
    assert EX.check(lambda: 42).passed


def test_hint_solution_and_html() -> None:
    assert str(EX.hint()) == str(EX.hint(1)) == "Hint: (1 of 2) a number"
    assert str(EX.hint(2)) == "Hint: (2 of 2) six times seven"
    assert "2 hints" in str(EX.hint(0)) and "2 hints" in str(EX.hint(True))
    assert "2 hints" in str(EX.hint(3)) and "2 hints" in str(EX.hint(1.0))
    assert str(EX.solution()) == "Solution: (the answer) 42"
    html = Feedback("incorrect", "a <b> & c\nd")._repr_html_()
    assert "&lt;b&gt; &amp; c<br>d" in html and "#b22222" in html


def test_studentize_assignment_and_def() -> None:
    src = "x = 1\n# BEGIN SOLUTION\nsql = '''\nSELECT a = b\n'''\n# END SOLUTION\nex.check(sql)\n"
    assert studentize_source(src) == "x = 1\nsql = ____  # your answer here\nex.check(sql)\n"
    func = (
        "# BEGIN SOLUTION\ndef decide(a):\n    y = a\n    return y\n# END SOLUTION\n"
        "ex.check(decide)"
    )
    assert studentize_source(func) == "decide = ____  # your answer here\nex.check(decide)"


def test_studentize_keeps_indent_and_falls_back() -> None:
    src = "if True:\n    # BEGIN SOLUTION\n    q = 3\n    # END SOLUTION\n"
    assert studentize_source(src) == "if True:\n    q = ____  # your answer here\n"
    assert studentize_source("# BEGIN SOLUTION\nprint(1)\n# END SOLUTION\n") == (
        "answer = ____  # your answer here\n"
    )
    assert studentize_source("a == b\n") == "a == b\n"


def test_make_student_copies(tmp_path: Path) -> None:
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# BEGIN SOLUTION stays in markdown"),
        new_code_cell("# BEGIN SOLUTION\nanswer = 42\n# END SOLUTION"),
        new_code_cell("EX.check(answer)", outputs=[], execution_count=3),
    ]
    src = tmp_path / "src"
    src.mkdir()
    nbformat.write(nb, src / "a.ipynb")
    (out,) = make_student_copies(src, tmp_path / "out")
    copy = nbformat.read(out, as_version=4)
    assert copy.cells[0].source == "# BEGIN SOLUTION stays in markdown"
    assert copy.cells[1].source == "answer = ____  # your answer here\n"
    assert copy.cells[2].execution_count is None and copy.cells[2].outputs == []


def test_cell_errors_lists_error_outputs() -> None:
    nb = new_notebook()
    nb.cells = [new_code_cell("1/0"), new_code_cell("x")]
    nb.cells[0].outputs = [
        nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero"),
        nbformat.v4.new_output("stream", text="hi"),
    ]
    assert cell_errors(nb) == ["ZeroDivisionError: division by zero"]


def test_whole_accepts_every_integer_type_and_names_a_wrong_type() -> None:
    import numpy as np
    import pandas as pd

    from labkit.exercises.kit import whole

    for value in (3, np.int64(3), np.int32(3), pd.Series([3]).iloc[0], 3.0, np.float64(3)):
        got = whole(value, "frontier")
        assert got == 3 and type(got) is int
    for value, words in (
        ("4", "the text '4'"),
        (True, "bool"),
        (3.5, "3.5 is not"),
        (float("nan"), "nan is not"),
        (None, "NoneType"),
    ):
        with pytest.raises(Wrong, match=words):
            whole(value, "frontier")
