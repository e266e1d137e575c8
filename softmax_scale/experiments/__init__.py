"""The toolkit's studies: each one module that computes, writes and summarises its results."""
