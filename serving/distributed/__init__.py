"""Tensor parallelism over torch.distributed: one model split across the GPUs (or CPU processes) of
a host. partition.py says who holds what; group.py sets up the process groups; launcher.py starts
one worker process per extra rank; step_channel.py carries each step from the driver (rank 0,
where the scheduler lives) to the workers; tp_runner.py is the driver's model runner and
worker.py the workers' loop. Nothing is imported here: the loader and the layers import
partition.py alone."""
