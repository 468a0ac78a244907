"""Everything that talks to, or makes sense of, the language model."""
