"""The ``softmax-scale`` command (placeholder until the CLI lands)."""


def main(argv=None) -> int:
    return 0
