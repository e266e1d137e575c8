"""The examples in the docstrings run and print what they say."""

import doctest

import pytest

import softmax_scale.laws
import softmax_scale.optimize

MODULES = [softmax_scale.optimize, softmax_scale.laws]


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__ for m in MODULES])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
