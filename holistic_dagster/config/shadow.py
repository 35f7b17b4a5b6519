"""resources/shadow.yaml: shadow evaluation on production traffic (where the logs land, which models answer them in
shadow, who judges, which personal data is removed before anything is stored). The feature is shadow/."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import phonenumbers
from pydantic import Field, field_validator, model_validator

from holistic_dagster.config.catalog import QualificationSpec
from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.records import Strict

# the kinds of personal data shadow.pii removes, each value replaced by [category]
CATEGORIES = (
    "secret",
    "email",
    "iban",
    "credit_card",
    "national_id",
    "ip",
    "date_of_birth",
    "phone",
    "person",
    "address",
)
# regions whose national phone formats are recognized (international +... numbers are recognized whatever these)
PHONE_REGIONS = (
    "US",
    "GB",
    "DE",
    "FR",
    "IN",
    "ES",
    "IT",
    "NL",
    "BR",
    "AU",
    "JP",
    "CN",
    "MX",
    "CH",
    "AT",
    "RU",
    "UA",
    "PL",
    "GR",
    "TR",
    "KR",
    "SA",
    "AE",
    "PT",
    "SE",
    "BE",
)


def known_categories(categories: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown PII categories {unknown}: known are {', '.join(CATEGORIES)}")
    return categories


class PiiSpec(Strict):
    # dotted paths into a log record dropped before anything else (e.g. request.user, metadata.user_email)
    drop_fields: tuple[str, ...] = ("request.user", "metadata.user_id", "metadata.user_email")
    # mask (default): whatever could identify a person is masked by its shape, typed by the precise detectors;
    # precise: only the precise detectors (keeps benign numbers and words, misses formats they do not know)
    policy: Literal["mask", "precise"] = "mask"
    redact: tuple[str, ...] = CATEGORIES  # categories of the precise detectors (shadow.pii) in use
    phone_regions: tuple[str, ...] = PHONE_REGIONS  # whose national phone formats are recognized

    @field_validator("redact")
    @classmethod
    def _known(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return known_categories(names)

    @field_validator("phone_regions")
    @classmethod
    def _regions(cls, regions: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [r for r in regions if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"unknown phone regions {unknown}: ISO 3166 codes as libphonenumber knows them (US, DE)")
        return regions


class ShadowSpec(Strict):
    """resources/shadow.yaml: where traffic logs land, which models answer them in shadow, who judges."""

    traffic_dir: str = "traffic"  # relative to HOLISTIC_HOME (data/), or absolute
    production: str = "production"  # the name production's answers are stored under
    candidates: tuple[str, ...] = Field(min_length=1)  # registered models that answer the same prompts
    judge: str  # a registered model
    slice_by: str = "metadata.route"  # dotted path of the record field that slices traffic ("" for none)
    max_tokens: int = Field(256, gt=0)  # of a candidate's answer (greedy)
    max_records: int | None = Field(None, gt=0)  # per log file: the first this many
    template: str = "judge_pairwise.j2"  # the arena's judge template (no reference answer)
    # the most tokens of the judge's verdict
    judge_max_tokens: int = Field(256, gt=0)
    max_failure_rate: float = Field(0.1, ge=0.0, le=1.0)  # judgements without a verdict a check tolerates
    # resamples of records for the win rates' 95% CIs
    bootstrap_samples: int = Field(1000, gt=0)
    # the seed of the answer order shown to the judge and of the bootstrap
    seed: int = 0
    # the most (USD) one log's shadow evaluation may cost each priced model in each role, counted across runs: a
    # candidate's answers, the judge's verdicts (its qualification, once per judge, is held to it on its own);
    # none: no limit
    max_cost: float | None = Field(None, ge=0.0)
    # what is removed from traffic before anything is stored, sent or logged
    pii: PiiSpec = PiiSpec()
    qualification: QualificationSpec = QualificationSpec()  # a judge below it gives no win rates (verdicts kept)

    @model_validator(mode="after")
    def _slice_kept(self) -> ShadowSpec:
        if self.slice_by and self.slice_by in self.pii.drop_fields:
            raise ValueError(f"slice_by {self.slice_by!r} is one of pii.drop_fields: it would be dropped first")
        return self

    def traffic_path(self, home: Path) -> Path:
        path = Path(self.traffic_dir)
        return path if path.is_absolute() else home / path


def load_shadow_spec(path: Path) -> ShadowSpec:
    return validate(ShadowSpec, read_yaml(path), path)
