"""CRAG's 50-page release (Task 3: one tar.bz2 of several JSONL parts) reads as it ships, and the validation
portion PruningRAG reports (`split` 0) is kept as the file is read (spec/pruningrag.md §3.1, P5)."""

from __future__ import annotations

import bz2
import io
import json
import tarfile

import pytest

from hoprag.data import QADataset, load_questions
from hoprag.data.records import DataFormatError


def crag(i: int, split: int, pages: int = 50) -> dict:
    results = [{"page_name": f"page {j}", "page_url": f"https://example.org/{i}/{j}", "page_snippet": f"snippet {j}",
                "page_result": f"<html><body><p>body {j}</p></body></html>", "page_last_modified": ""}
               for j in range(pages)]  # fmt: skip
    return {"interaction_id": f"id{i}", "query_time": "03/05/2024, 23:18:31 PT", "domain": "movie",
            "question_type": "simple", "static_or_dynamic": "static", "query": f"question {i}?",
            "answer": f"answer {i}", "alt_ans": [], "split": split, "search_results": results}  # fmt: skip


def jsonl(records, tail: str = "") -> bytes:
    return ("".join(json.dumps(r) + "\n" for r in records) + tail).encode()


def write_tar(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:bz2") as archive:
        folder = tarfile.TarInfo("crag_task_3_dev_v4")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for name, data in members.items():
            info = tarfile.TarInfo(f"crag_task_3_dev_v4/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.fixture
def release(tmp_path):
    """Two JSONL parts (the second bz2-compressed inside the archive), a README, and a broken last line."""
    path = tmp_path / "crag" / "crag_task_3_dev_v4.tar.bz2"
    path.parent.mkdir()
    write_tar(path, {
        "README.md": b"not questions",
        "crag_task_3_dev_v4_0.jsonl": jsonl([crag(0, 1), crag(1, 0), crag(2, 1)]),
        "crag_task_3_dev_v4_1.jsonl.bz2": bz2.compress(jsonl([crag(3, 0), crag(4, 0)], tail="{broken\n")),
    })  # fmt: skip
    return path


def test_a_tar_release_reads_its_jsonl_parts_in_archive_order_with_their_50_pages(release):
    examples = load_questions(release, format="crag", limit=5)
    assert [ex.id for ex in examples] == ["id0", "id1", "id2", "id3", "id4"]
    assert len(examples[0].metadata["search_results"]) == 50 and examples[3].metadata["split"] == 0
    with pytest.raises(DataFormatError, match=r"crag_task_3_dev_v4\.tar\.bz2:crag_task_3_dev_v4/crag_task_3_dev_v4_1"
                                              r"\.jsonl\.bz2, line 3: invalid JSON"):  # fmt: skip
        load_questions(release, format="crag")


def test_where_keeps_the_validation_split_as_the_file_is_read_before_limit(release):
    data = QADataset("crag", "crag/crag_task_3_dev_v4.tar.bz2", format="crag", root=str(release.parents[1]),
                     where={"split": 0}, limit=3)  # fmt: skip
    assert [ex.id for ex in data] == ["id1", "id3", "id4"]  # stops before the broken line
    both = QADataset("crag", str(release), format="crag", where={"split": 0}, types=["comparison"], limit=1)
    with pytest.raises(DataFormatError):  # no question matches both: the whole file is read
        len(both)


def test_an_archive_without_jsonl_parts_holds_no_records(tmp_path):
    path = tmp_path / "empty.tar.bz2"
    write_tar(path, {"README.md": b"nothing"})
    with pytest.raises(DataFormatError, match="holds no records"):
        load_questions(path, format="crag")
