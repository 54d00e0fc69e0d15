"""The hourly HTML drift report: Evidently's DataDriftPreset page with Vigil's own sections."""
