"""Host side: CUDA driver, argument adapters, TensorMaps and the launcher."""
