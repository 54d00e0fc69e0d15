"""Engine canaries: fixed probes through the engine's own API, compared with a calibrated
baseline so a silent numerics change of the serving stack raises an `engine` alert."""
