"""What host and worker both speak, on the ground floor: the wire records (one request and one
reply record per action, the sections they carry, the protocol's versions and its one-line
error) and the shared vocabulary (the runtime registry, the precision names, the verdicts, the
error kinds).

Why a package of its own: host code used to import these records from the worker and the worker
from itself, so every host wing depended on the worker package (and a package loop ran through
it). This package imports only the standard library and its own modules, so the images bake it
beside the worker (``protocol.WORKER_SOURCES``) and any host wing may import it.
"""
