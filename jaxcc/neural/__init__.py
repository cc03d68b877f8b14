"""The neural compiler: a Flax NNX decoder that writes jaxcc bytecode (docs/neural.md)."""
