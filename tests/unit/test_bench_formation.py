"""The formation benchmark reads node registrations from Ray's GCS log; a format change must show."""

import datetime
import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "formation.py"
spec = importlib.util.spec_from_file_location("formation", BENCH)
formation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(formation)

# Lines as Ray 2.60's gcs_server.out writes them (node ids shortened).
GCS_LOG = """\
[2026-11-29 13:42:49,101 I 24399 24399] (gcs_server) gcs_init_data.cc:62: Finished loading node table data, size = 0
[2026-11-29 13:42:51,389 I 24399 24415] (gcs_server) gcs_node_manager.cc:111: Registering new node. node_id=092f node_name=10.9.0.1 node_address=10.9.0.1
[2026-11-29 13:42:53,730 I 24399 24415] (gcs_server) gcs_node_manager.cc:111: Registering new node. node_id=853c node_name=10.9.0.2 node_address=10.9.0.2
[2026-11-29 13:42:54,010 I 24399 24415] (gcs_server) gcs_node_manager.cc:111: Registering new node. node_id=8076 node_name=10.9.0.2 node_address=10.9.0.2
"""


def test_registrations_are_seconds_after_the_start_by_node_ip(tmp_path):
    log = tmp_path / "gcs_server.out"
    log.write_text(GCS_LOG)
    t0 = datetime.datetime(2026, 11, 29, 13, 42, 50).timestamp()  # Ray logs local time
    # A node registering twice (a restarted raylet) counts from its first registration.
    assert formation.registrations(log, t0) == {"10.9.0.1": 1.39, "10.9.0.2": 3.73}


def test_registrations_of_a_missing_log_are_empty(tmp_path):
    assert formation.registrations(tmp_path / "absent.out", 0.0) == {}
