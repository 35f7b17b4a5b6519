"""The adapter methods, one module each, behind one lookup (as HELM's AdapterFactory): `adapter_method(name)`.
Adding a method is one module with an AdapterMethod subclass, plus its line in METHODS below."""

from __future__ import annotations

from holistic_dagster.adaptation.methods.base import AdapterMethod
from holistic_dagster.adaptation.methods.generation import Generation
from holistic_dagster.adaptation.methods.language_modeling import LanguageModeling
from holistic_dagster.adaptation.methods.multiple_choice_joint import MultipleChoiceJoint
from holistic_dagster.adaptation.methods.multiple_choice_joint_chain_of_thought import MultipleChoiceJointChainOfThought
from holistic_dagster.adaptation.methods.multiple_choice_separate import (
    MultipleChoiceSeparateCalibrated,
    MultipleChoiceSeparateOriginal,
)
from holistic_dagster.adaptation.methods.ranking_binary import RankingBinary
from holistic_dagster.errors import CatalogError

METHODS: dict[str, AdapterMethod] = {
    m.name: m()
    for m in (
        Generation,
        MultipleChoiceJoint,
        MultipleChoiceJointChainOfThought,
        MultipleChoiceSeparateOriginal,
        MultipleChoiceSeparateCalibrated,
        RankingBinary,
        LanguageModeling,
    )
}
ADAPTER_METHODS = tuple(METHODS)


def adapter_method(name: str) -> AdapterMethod:
    if name not in METHODS:
        raise CatalogError(f"unknown adapter method {name!r} (known: {', '.join(METHODS)})")
    return METHODS[name]


__all__ = ["ADAPTER_METHODS", "METHODS", "AdapterMethod", "adapter_method"]
