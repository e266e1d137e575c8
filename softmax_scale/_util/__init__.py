"""Private helpers shared by the whole package: validation, seeding, progress bars, numba options, files."""
