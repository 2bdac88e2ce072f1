"""The API source's domain classifiers (spec/pruningrag.md §6.2 step 1, §14): the gold oracle, the zero-shot LLM
prompt (batched, charged per question, parse failures falling back to `open`), and the embedding + linear-head
classifier trained end to end by `python train.py +model=domain_classifier` on a tiny labelled CRAG file
(a bag-of-words hash embedder stands in for MiniLM), against the stand-in mock API server of test_api_source."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hoprag.cost import Cost
from hoprag.data import load_questions
from hoprag.llm.gguf import share_conversions
from hoprag.llm.scripted import ScriptedLLM
from hoprag.paths import PROJECT_ROOT
from hoprag.sources.api import APISource
from hoprag.sources.api.domain import (
    DomainGuess,
    EmbeddingDomains,
    GoldDomains,
    LLMDomains,
    domain_classifier,
    domain_messages,
    parse_domain,
)
from hoprag.sources.api.ner import DOMAINS, ner_messages
from hoprag.training.splits import LeakError
from tests.unit import test_api_source
from tests.unit.test_api_source import COMPANIES, FUNKO, QUERY_TIME, question

server = test_api_source.server  # the stand-in mock API server, a fixture

HASH_OVERRIDES = ["embedder._target_=tests.fakes.HashEmbedder", "embedder.name=hash-bow", "++embedder.dim=256",
                  "~embedder.model", "~embedder.device", "~embedder.max_length"]  # fmt: skip
# Words that tell the domains apart, for the tiny labelled file and the unseen questions.
VOCABULARY = {
    "finance": ["stock", "dividend", "shares", "earnings", "ticker", "market", "cap", "price"],
    "music": ["album", "song", "singer", "band", "grammy", "billboard", "lyrics", "concert"],
    "movie": ["film", "actor", "director", "oscar", "cinema", "screenplay", "box", "office"],
    "sports": ["team", "game", "nba", "soccer", "goals", "points", "season", "league"],
    "open": ["river", "capital", "planet", "language", "mountain", "president", "invented", "island"],
}


def llm_source(server, domain_reply: str | dict[str, str], ner: dict[str, str] | None = None, **kwargs) -> APISource:
    """An APISource whose LLM answers the domain prompt with `domain_reply` (or `domain_reply[word]` for the
    questions containing the word) and the NER prompt with `ner[word]`."""
    by_word = domain_reply if isinstance(domain_reply, dict) else {"": domain_reply}
    rules = [(f"### Question\n[^\n]*{word}[^\n]*\n### Domain", reply) for word, reply in by_word.items()]
    rules += [(f"### Question\n[^\n]*{word}[^\n]*\nEntities:", reply) for word, reply in (ner or {}).items()]
    llm = ScriptedLLM(rules=rules, default_reply="None (company)")
    return APISource(llm, base_url=server.url, company_names=COMPANIES, retries=0, timeout=5.0, domain="llm", **kwargs)


# -- the LLM prompt and its reply ---------------------------------------------------------------------


def test_the_reply_names_a_domain_or_falls_back_to_open_as_a_parse_failure():
    for domain in DOMAINS:
        assert parse_domain(domain) == DomainGuess(domain, True, domain)
    assert parse_domain("Domain: Sports.").domain == "sports" and parse_domain("sport").domain == "sports"
    assert parse_domain("This is about movies").domain == "movie"
    assert parse_domain(" FINANCE\nbecause of the stock").domain == "finance"
    assert parse_domain("music, or maybe movie").domain == "music"  # the first named
    assert parse_domain("I cannot tell.") == DomainGuess("open", False, "I cannot tell.")
    assert not parse_domain("").parsed and not parse_domain("financial").parsed


def test_the_prompt_lists_the_five_domains_and_ends_with_the_question():
    _, user = domain_messages("How much did Funko open at today?")
    assert all(f"- {d}:" in user["content"] for d in DOMAINS)
    assert user["content"].endswith("### Question\nHow much did Funko open at today?\n### Domain\n")


def test_llm_domains_are_one_batched_greedy_generation_charged_to_each_question():
    llm = ScriptedLLM(rules=[("Funko", "finance"), ("Adele", "music")])
    costs = [Cost(), Cost()]
    questions = [question(FUNKO, "finance", "a"), question("When was the singer Adele born, and where?", "music", "b")]
    assert LLMDomains(llm).classify(questions, costs) == [DomainGuess("finance", True, "finance"),
                                                          DomainGuess("music", True, "music")]
    (call,) = llm.calls
    assert len(call.prompts) == 2 and call.params.greedy and call.params.max_new_tokens == 8
    expected = [llm.prompt_token_count(domain_messages(q.question)) for q in questions]
    assert [c.prompt_tokens for c in costs] == expected and expected[0] != expected[1]
    assert [c.completion_tokens for c in costs] == [1, 1] and all(set(c.seconds) == {"api_domain"} for c in costs)


# -- the modes inside the API source ------------------------------------------------------------------


def test_llm_mode_routes_the_pipeline_and_charges_tokens_to_the_right_question(server):
    source = llm_source(server, {"Funko": "finance", "Curie": "open"}, {"How much did Funko": "Funko (company)"})
    examples = [question(FUNKO, "finance", "a"), question("Who is Marie Curie?", "open", "b")]
    costs = [Cost(), Cost()]
    funko, curie = source.fetch(examples, costs)
    assert len(funko) == 3 and curie == []
    domain_call, ner_call = source.llm.calls
    assert len(domain_call.prompts) == 2 and len(ner_call.prompts) == 1  # the open question gets no NER
    count = source.llm.prompt_token_count
    assert costs[0].prompt_tokens == count(domain_messages(FUNKO)) + count(ner_messages(FUNKO, "finance"))
    assert costs[1].prompt_tokens == count(domain_messages("Who is Marie Curie?"))
    assert set(costs[0].seconds) == {"api_domain", "api_ner", "api"} and set(costs[1].seconds) == {"api_domain"}
    assert [(s["domain_oracle"], s["domain_parse_failed"], s["domain_correct"]) for s in source.question_stats] == [
        (0.0, 0.0, 1.0), (0.0, 0.0, 1.0)]


def test_an_llm_reply_naming_no_domain_falls_back_to_open_and_is_counted(server):
    source = llm_source(server, {"Funko": "It is about a company.", "Adele": "movie"}, {"Funko": "Funko (company)"})
    examples = [question(FUNKO, "finance", "a"), question("When was Adele born?", "music", "b")]
    costs = [Cost(), Cost()]
    assert source.fetch(examples, costs) == [[], []]
    fallback, wrong = source.question_stats
    assert fallback == {"ner_parse_failed": 0.0, "no_match": 0.0, "empty": 1.0, "api_calls": 0.0, "domain_oracle": 0.0,
                        "domain_parse_failed": 1.0, "domain_correct": 0.0}  # fmt: skip
    assert (wrong["domain_parse_failed"], wrong["domain_correct"]) == (0.0, 0.0)  # a wrong domain parses
    assert (source.traces[0].domain, source.traces[0].domain_parsed) == ("open", False)
    assert server.log == [] and costs[0].llm_calls == 1  # open: no NER and no API call
    assert source.counts["domain_parse_failures"] == 1 and source.counts["domain_correct"] == 0
    assert source.counts["domain_known"] == 2 and source.counts["domain_oracle"] == 0


def test_gold_mode_is_the_oracle_and_says_so(server):
    gold = domain_classifier("gold", ScriptedLLM(), field="domain")
    assert isinstance(gold, GoldDomains) and gold.oracle
    assert gold.classify([question(FUNKO, "finance")], [Cost()]) == [DomainGuess("finance")]
    source = APISource(ScriptedLLM(default_reply="None (company)"), base_url=server.url, company_names=COMPANIES,
                       domain="gold", retries=0)  # fmt: skip
    source.fetch([question("Who is Marie Curie?", "open")], [Cost()])
    assert source.question_stats[0]["domain_oracle"] == 1.0 and source.counts["domain_oracle"] == 1
    assert source.llm.calls == []  # no LLM call for the domain (nor NER: open)


def test_unknown_modes_and_an_embedding_mode_without_export_are_refused():
    with pytest.raises(ValueError, match=r"domain must be one of \('gold', 'llm', 'embedding'\)"):
        APISource(ScriptedLLM(), company_names=None, domain="oracle")
    with pytest.raises(ValueError, match=r"domain_export: the export folder of `python train.py \+model=domain_clas"):
        APISource(ScriptedLLM(), company_names=None, domain="embedding")


# -- the embedding classifier, trained end to end -----------------------------------------------------


def labelled_file(path: Path, per_domain: int = 8) -> Path:
    """A tiny CRAG file: `per_domain` questions per domain, each made of that domain's words."""
    with path.open("w", encoding="utf-8") as f:
        for domain, words in VOCABULARY.items():
            for i in range(per_domain):
                query = f"what about the {words[i]} and the {words[(i + 3) % 8]} of item {domain[:2]}{i}?"
                f.write(json.dumps({"interaction_id": f"{domain}-{i}", "query": query, "answer": "x",
                                    "query_time": QUERY_TIME, "domain": domain, "question_type": "simple",
                                    "static_or_dynamic": "static", "search_results": []}) + "\n")  # fmt: skip
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, str]:
    """`python train.py +model=domain_classifier` on the tiny file; returns (run directory, file, output)."""
    run = tmp_path_factory.mktemp("domain_run")
    data = labelled_file(run / "domains.jsonl")
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(run / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "train.py", "+model=domain_classifier", *HASH_OVERRIDES, "threads=1", "~logger.wandb",
         f"model.datamodule.data.questions={data}", "model.module.lr=0.1", "trainer.max_epochs=40",
         f"hydra.run.dir={run}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run, data, proc.stdout


def test_train_py_trains_the_domain_classifier_and_publishes_its_export(trained):
    run, _, out = trained
    assert "{'fit': 16, 'val': 4, 'test': 20} questions (fit / select / evaluation), labels of 'domain'" in out
    metrics = dict(re.findall(r"^  (\S+/\S+) +([\d.]+)$", out, re.MULTILINE))
    assert float(metrics["test/acc"]) > 0.4  # held-out questions, five classes
    settings = json.loads((run / "export" / "router.json").read_text())
    assert settings["labels"] == list(DOMAINS) and "options" not in settings
    assert len(settings["trained_on"]) == 20  # fit + selection questions
    published = run / "cache" / "routers" / "minilm-crag-domain" / "router.json"
    assert published.read_text() == (run / "export" / "router.json").read_text()


def test_the_export_predicts_domains_and_refuses_its_training_questions(trained, server):
    run, data, _ = trained
    classifier = EmbeddingDomains(run / "export")
    unseen = [question(f"which {' '.join(words)}?", domain, f"new-{domain}") for domain, words in VOCABULARY.items()]
    costs = [Cost() for _ in unseen]
    assert [g.domain for g in classifier.classify(unseen, costs)] == list(VOCABULARY)
    assert all(set(c.seconds) == {"api_domain"} and c.llm_calls == 0 for c in costs)
    trained_ids = {r["id"] for r in json.loads((run / "export" / "router.json").read_text())["trained_on"]}
    seen = [ex for ex in load_questions(data, format="crag") if ex.id in trained_ids][:2]
    with pytest.raises(LeakError, match="question ids"):
        classifier.classify(seen, [Cost(), Cost()])

    source = APISource(ScriptedLLM(default_reply="None (company)"), base_url=server.url, company_names=COMPANIES,
                       domain="embedding", domain_export=str(run / "export"), retries=0)  # fmt: skip
    source.fetch(unseen, [Cost() for _ in unseen])
    assert [t.domain for t in source.traces] == list(VOCABULARY)
    assert all(s["domain_oracle"] == 0.0 and s["domain_correct"] == 1.0 for s in source.question_stats)


def test_router_and_label_exports_are_not_confused(trained, tmp_path):
    from hoprag.routers.classifier import ClassifierRouter
    from hoprag.training.classifier import LabelClassifier

    with pytest.raises(ValueError, match="not router options: load it with LabelClassifier"):
        ClassifierRouter.load(trained[0] / "export")
    router_export = tmp_path / "router"
    router_export.mkdir()
    for name in ("head.pt", "router.json"):
        (router_export / name).write_bytes((trained[0] / "export" / name).read_bytes())
    settings = json.loads((router_export / "router.json").read_text())
    del settings["labels"]
    (router_export / "router.json").write_text(json.dumps({**settings, "options": "tatqa"}))
    with pytest.raises(ValueError, match="is a router export"):
        LabelClassifier.load(router_export)
    settings["labels"] = ["finance", "music", "movie", "sports", "weather"]
    (router_export / "router.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=r"labels \['weather'\] are not CRAG domains"):
        EmbeddingDomains(router_export)


def test_a_file_without_the_label_is_refused(tmp_path):
    from hoprag.data import QADataset
    from hoprag.routers.classifier import RouterDataModule
    from tests.fakes import HashEmbedder

    path = labelled_file(tmp_path / "domains.jsonl", per_domain=2)
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace('"domain": "finance"', '"domain": "weather"')
    path.write_text("\n".join(lines) + "\n")
    data = QADataset("crag", str(path), format="crag")
    dm = RouterDataModule(data, HashEmbedder(dim=32), label_field="domain", labels=DOMAINS, eval_fraction=0.3,
                          cache_dir=str(tmp_path / "cache"))  # fmt: skip
    with pytest.raises(ValueError, match=r"no 'domain' among \['finance'.*\('finance-0', 'weather'\)"):
        dm.setup("fit")
    with pytest.raises(ValueError, match="label_field and labels go together"):
        RouterDataModule(data, HashEmbedder(dim=32), label_field="domain")


def test_the_head_and_the_datamodule_must_agree_on_the_classes(tmp_path):
    import lightning as L

    from hoprag.data import QADataset
    from hoprag.routers.classifier import RouterClassifierModule, RouterDataModule
    from tests.fakes import HashEmbedder

    data = QADataset("crag", str(labelled_file(tmp_path / "domains.jsonl", per_domain=2)), format="crag")
    dm = RouterDataModule(data, HashEmbedder(dim=32), label_field="domain", labels=DOMAINS, eval_fraction=0.3,
                          cache_dir=str(tmp_path / "cache"))  # fmt: skip
    module = RouterClassifierModule({"_target_": "tests.fakes.HashEmbedder", "dim": 32}, labels=DOMAINS[::-1])
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu")  # fmt: skip
    with pytest.raises(ValueError, match=r"classes \['finance', .*\] are not the head's \['open', "):
        trainer.fit(module, datamodule=dm)
