"""The runtime: devices, buffers, launch configs, validated launches and fault reporting."""
