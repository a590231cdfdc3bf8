"""The ground layer: error types, input limits, units, strict YAML, key tables, shipped-data paths."""
