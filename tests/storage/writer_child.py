"""Child process for the SIGKILL test: a SampleWriter submitting records until it is killed.

usage: python writer_child.py DATABASE_URL JOURNAL_DIR
Prints "ready" once the writer runs; ids are uuid4 (the parent reads them back from the
journal and the database, so nothing needs to be printed per record).
"""

import sys
import time
import uuid

from storage.writer import SampleWriter

url, journal_dir = sys.argv[1], sys.argv[2]
writer = SampleWriter(
    url, journal_dir, batch_size=50, flush_interval_s=0.02, retry_initial_s=0.05, retry_max_s=0.2
)
print("ready", flush=True)
i = 0
while True:
    writer.submit({"id": str(uuid.uuid4()), "prompt": f"child {i}", "segment": "child"})
    i += 1
    if i % 50 == 0:
        time.sleep(0.01)  # ~4-5k records/s: keeps batches flowing without starving the parent
