"""``python -m softmax_scale.advice --docs``: write the guide's evidence block (:func:`softmax_scale.advice.write_docs`)."""

import sys

from . import write_docs

if sys.argv[1:] != ["--docs"]:
    print("usage: python -m softmax_scale.advice --docs  (writes the guide's evidence block)", file=sys.stderr)
    sys.exit(2)
print(write_docs())
