"""Few-shot chain-of-thought exemplars: 3 per dataset, as TreeRare's baselines use (spec/treerare.md App. B).

Each was written for hoprag from one question of the bundled *train* samples (never a dev question; `source`
names the record: HotpotQA `hotpot_train_99.json` `_id`, 2Wiki `train_500.json` `_id`, MuSiQue
`musique_ans_train_98.jsonl` `id`), its steps restating the record's supporting facts. The keys are the
`data` config names they serve (`exemplars_for`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exemplar:
    """A worked question: its reasoning `steps`, its short `answer`, and the train record it was written from."""

    question: str
    steps: tuple[str, ...]
    answer: str
    source: str

    def explained(self) -> str:
        """The TreeRare answer form: `#Explanations: <steps>` then `#FINAL: The answer is <answer>.`"""
        return f"#Explanations: {' '.join(self.steps)}\n#FINAL: The answer is {self.answer}."

EXEMPLARS: dict[str, tuple[Exemplar, ...]] = {
    "hotpotqa": (
        Exemplar(
            "Who directed the film that was shot in or around Leland, North Carolina in 1986",
            (
                "Maximum Overdrive (1986) is a film shot in or around Leland, North Carolina.",
                "Maximum Overdrive was written and directed by Stephen King.",
            ),
            "Stephen King",
            "5a8718c25542991e771816c7",
        ),
        Exemplar(
            "Are Christopher Nolan and Sathish Kalathil both film directors?",
            (
                "Christopher Nolan is an English-American film director.",
                "Sathish Kalathil is an Indian film and documentary director.",
                "So both are film directors.",
            ),
            "yes",
            "5ae40c465542996836b02c25",
        ),
        Exemplar(
            "Grace Krilanovich's first novel was published by an independent mom-and-pop publishing house that "
            "was founded in 2005, and is based where?",
            (
                "Grace Krilanovich's first novel, The Orange Eats Creeps, was published by Two Dollar Radio.",
                "Two Dollar Radio, founded in 2005, is an independent publishing house based in Columbus, Ohio.",
            ),
            "Columbus, Ohio",
            "5ab3c131554299233954ff9c",
        ),
    ),
    "2wiki": (
        Exemplar(
            "Who is the child of the director of film Devotion (1929 Film)?",
            ("The film Devotion (1929) was directed by Guido Brignone.", "Guido Brignone's child is Lilla Brignone."),
            "Lilla Brignone",
            "d79ff79a0bda11eba7f7acde48001122",
        ),
        Exemplar(
            "Which film has the director died first, The Prairie King or Confessions Of An Opium Eater?",
            (
                "The Prairie King was directed by B. Reeves Eason, who died on June 9, 1956.",
                "Confessions of an Opium Eater was directed by Albert Zugsmith, who died on October 26, 1993.",
                "B. Reeves Eason died first.",
            ),
            "The Prairie King",
            "58f39f7808b511ebbd88ac1f6bf848b6",
        ),
        Exemplar(
            "Are both villages, Stanari and Krasnoye, Prokhorovsky District, Belgorod Oblast, located in the "
            "same country?",
            (
                "Krasnoye, Prokhorovsky District, Belgorod Oblast is in Russia.",
                "Stanari is in Bosnia and Herzegovina.",
                "So they are in different countries.",
            ),
            "no",
            "2f472466097711ebbdb0ac1f6bf848b6",
        ),
    ),
    "musique": (
        Exemplar(
            "Who was the first president of the association which published Journal of Psychotherapy Integration?",
            (
                "The Journal of Psychotherapy Integration is published by the American Psychological Association.",
                "The first president of the American Psychological Association was G. Stanley Hall.",
            ),
            "G. Stanley Hall",
            "2hop__150763_14904",
        ),
        Exemplar(
            "What is the name of the waterfall in the country where the Bubye River is found?",
            ("The Bubye River is in Zimbabwe.", "The waterfall in Zimbabwe is Victoria Falls."),
            "Victoria Falls",
            "2hop__205146_62031",
        ),
        Exemplar(
            "Who was in charge of the country where the composer of Aschenbrodel was a citizen?",
            (
                "Aschenbrödel was composed by Johann Strauss II.",
                "Johann Strauss II was a citizen of Austria.",
                "Karl Renner was in charge of Austria.",
            ),
            "Karl Renner",
            "3hop1__404363_705261_126049",
        ),
    ),
}


def exemplars_for(name: str) -> tuple[Exemplar, ...]:
    """The exemplars for dataset `name`; a variant such as `hotpotqa_train` or `2wiki_open` gets its base's."""
    key = name if name in EXEMPLARS else name.split("_")[0]
    if key not in EXEMPLARS:
        raise ValueError(
            f"no few-shot CoT exemplars for data {name!r} (hoprag/search/cot_exemplars.py has {sorted(EXEMPLARS)}):"
            f" set method.exemplars=<one of them>, or method.mode=zero_shot"
        )
    return EXEMPLARS[key]
