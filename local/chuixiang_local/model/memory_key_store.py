"""A key's loans and refusals in memory (the :class:`~chuixiang.resilience.key_loans.KeyStore` of a bench or a
test with no table): the same policy as the DynamoDB store, its write applying only over the version read."""

from __future__ import annotations

import threading

from chuixiang.resilience.key_loans import KeyRecord


class MemoryKeyStore:
    def __init__(self) -> None:
        self._record = KeyRecord()
        self._lock = threading.Lock()

    def read(self) -> KeyRecord:
        with self._lock:
            return self._record

    def write(self, record: KeyRecord, read_version: int) -> bool:
        with self._lock:
            if self._record.version != read_version:
                return False
            self._record = record
            return True
