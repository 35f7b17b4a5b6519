"""The model registry (resources/models.yaml) and the deployment's settings per backend kind
(resources/backends.yaml): a model's own settings win, the deployment's come next, the schema's defaults last."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from holistic_dagster.config.redaction import register_secret_env
from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import SLUG, Price, Strict

PositiveInt = Annotated[int, Field(gt=0)]


class TransformersSettings(Strict):
    """Deployment settings of local transformers models."""

    device: str = Field("auto", description="auto: cuda when present, else cpu")
    batch_size: PositiveInt | Literal["auto"] = Field(
        "auto",
        description="rows per forward pass (prompts, contexts or continuations); auto: 128 on a CPU, up to 256 on a "
        "GPU, halved and remembered when the GPU runs out of memory",
    )
    batch_tokens: PositiveInt | Literal["auto"] = Field(
        "auto",
        description="padded tokens one forward pass holds (rows x the widest row, the key/value cache it continues "
        "included); auto: 16384 on a CPU, what half the GPU's free memory holds (at most 65536) on a GPU. On a CPU a "
        "generation batch is also held to rows x computed tokens x width <= 4194304, whatever the setting: long "
        "prompts run one or a few at a time",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: the checkpoint's own; a float32 checkpoint runs in bfloat16 on GPUs that support it"
    )

    @field_validator("batch_size", "batch_tokens", mode="before")
    @classmethod
    def _number_text(cls, v):
        # Dagster's resource config carries these as text ("auto" or "32")
        return int(v) if isinstance(v, str) and v.strip().isdigit() else v


class _HttpSettings(Strict):
    max_concurrency: int = Field(8, gt=0, description="requests in flight per model")
    timeout_s: float = Field(120.0, gt=0, description="seconds one request may take before it is retried")
    max_attempts: int = Field(5, gt=0, description="retries on timeouts, 429 and 5xx, with backoff and jitter")


class TGISettings(_HttpSettings):
    """Deployment settings of TGI servers (each serves one model: base_url belongs to the model entry)."""

    ENTRY_ONLY: ClassVar[tuple[str, ...]] = ("base_url",)  # another kind's setting its entries take too

    # TGI batches continuously on the server: more requests in flight keep it busy
    max_concurrency: int = Field(16, gt=0, description="requests in flight per model")


class OpenAISettings(_HttpSettings):
    """Deployment settings of OpenAI and OpenAI-compatible servers."""

    base_url: str | None = Field(None, description="None: https://api.openai.com/v1")
    api_key_env: str | None = Field(
        None, description="the NAME of the variable holding the key (never the key); None: the server needs none"
    )


class LlamaCppSettings(_HttpSettings):
    """Deployment settings of llama.cpp models: llama.cpp's server started in the evaluating process for the
    entry's GGUF file (or an external llama.cpp server at the entry's base_url)."""

    ENTRY_ONLY: ClassVar[tuple[str, ...]] = ("base_url",)

    threads: int | None = Field(None, gt=0, description="CPU threads that decode; None: every core")
    slots: int = Field(2, gt=0, description="requests the server decodes at once (n_parallel)")
    n_ctx: int = Field(4096, gt=0, description="tokens of context each slot holds (at most the model's own)")
    max_concurrency: int = Field(2, gt=0, description="requests in flight per model (one per slot)")
    reuse_context: bool = Field(
        True,
        description="score a question's choices from one evaluation of its context (the slot's cache): several "
        "times faster, log-probabilities within the bound bench/results/llamacpp_agreement.md states; false: every "
        "choice evaluates its whole prompt",
    )


class EchoSettings(Strict):
    """Settings of the weightless echo model (clients.echo_client)."""

    context_tokens: int = Field(4096, gt=0, description="the context window it reports (tokens: words)")


# the one schema of backend settings: kind -> its settings and their defaults
BACKEND_SETTINGS: dict[str, type[Strict]] = {
    "transformers": TransformersSettings,
    "tgi": TGISettings,
    "openai": OpenAISettings,
    "llamacpp": LlamaCppSettings,
    "echo": EchoSettings,
}


# resources/backends.yaml: the deployment's settings per backend kind; what it leaves out takes the schema's defaults
BackendSettings = create_model(
    "BackendSettings",
    __base__=Strict,
    __module__=__name__,
    __doc__="resources/backends.yaml: the deployment's settings per backend kind.",
    **{kind: (settings, settings()) for kind, settings in BACKEND_SETTINGS.items()},
)


class _Model(Strict):
    name: str = Field(json_schema_extra={"shown_default": "its key"})  # the model partition's key (from the registry)
    # the kind of client: transformers, tgi, openai, llamacpp or echo (its settings are below)
    backend: Literal[tuple(BACKEND_SETTINGS)]  # type: ignore[valid-type]
    # transformers: a local checkpoint directory, a hub id, demo:<name> for a built-in demo model, or
    # gguf:<package>/<file>.gguf (a GGUF file shipped in an installed package; or gguf:<path>), converted once;
    # openai: the model id the server knows; tgi: a label (the server serves one model, /info names it)
    path: str
    revision: str | None = None  # pin a revision; otherwise a checkpoint's content hash or what the server reports
    description: str = ""  # what the model is, shown by the CLI, the report and the UI
    max_context: int | None = Field(None, gt=0)  # the context window in tokens; default: what the model says
    # openai: use /v1/chat/completions instead of /v1/completions; transformers: lay every prompt out with the
    # model's chat template (as lm-eval's --apply_chat_template; off by default, as in lm-eval: HELM 0.5 turns it on
    # for a local Hugging Face model whose tokenizer has a chat template)
    chat: bool = False
    prompt_logprobs: bool = False  # the server returns prompt log-probabilities (echo + logprobs)
    tokenizer: str | None = None  # a local tokenizer for exact token counts; otherwise ~4 characters a token
    # the registered model this one is a new revision of: the regressions asset tests it against that one
    previous: str | None = None
    # automation: re-evaluate when the server reports a new revision (TGI /info, OpenAI-compatible /v1/models)
    watch: bool = False
    # scale-out (resources/celery.yaml): the Celery queue this model's requests run on, e.g. one per GPU host or
    # TGI server; unset, the deployment's requests_queue
    queue: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    # what the provider charges (USD per million input / output tokens): the efficiency family then reports cost,
    # and a suite's or a command's max_cost is checked before any request; none for a local model (compute time)
    price: Price | None = None

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG.match(v):
            raise ValueError(f"model name {v!r} must be a lower-case slug (letters, digits, . _ -)")
        return v

    @model_validator(mode="after")
    def _schema_defaults(self) -> _Model:
        # an entry takes its own kind's settings: another kind's (a TGI entry's `device`) is a mistake, not a no-op
        kind = BACKEND_SETTINGS[self.backend]
        own = [*kind.model_fields, *getattr(kind, "ENTRY_ONLY", ())]
        others = {key for settings in BACKEND_SETTINGS.values() for key in settings.model_fields} - set(own)
        if wrong := sorted(others & self.model_fields_set):
            raise ValueError(
                f"{', '.join(wrong)}: not a setting of a {self.backend} model (its settings: {', '.join(own)})"
            )
        # filled in place, so that model_fields_set still tells the entry's own settings from defaults
        defaults = BACKEND_SETTINGS[self.backend]()
        for key in type(defaults).model_fields:
            if key not in self.model_fields_set:
                self.__dict__[key] = getattr(defaults, key)
        return self


def _entry_settings() -> dict[str, tuple]:
    """Every backend kind's settings as fields of a registry entry: unset (None) unless the entry gives them."""
    fields, kinds = {}, {}
    for kind, kind_settings in BACKEND_SETTINGS.items():
        for key, field in kind_settings.model_fields.items():
            kinds.setdefault(key, []).append(kind)
            typed = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
            fields.setdefault(key, (typed, field.description))
    # each says the backends whose setting it is (a setting of another kind is refused)
    return {
        key: (typed | None, Field(None, description=f"{', '.join(kinds[key])}: {description}"))
        for key, (typed, description) in fields.items()
    }


# A registry entry (resources/models.yaml): what the model is, and any backend setting of its kind, which wins over
# the deployment's (backends.yaml) and the schema's default for the kind; settings of other kinds stay None.
ModelSpec = create_model(
    "ModelSpec", __base__=_Model, __module__=__name__, __doc__="A registry entry.", **_entry_settings()
)


def load_backend_defaults(path: Path) -> BackendSettings:
    """The deployment's settings per backend kind (resources/backends.yaml; the file is optional), validated
    against the schema, which fills in what the file leaves out."""
    path = Path(path)
    if not path.exists():
        return BackendSettings()
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping of backend kind -> settings")
    for kind, values in data.items():
        if kind not in BACKEND_SETTINGS:
            raise CatalogError(f"{path}: unknown backend kind {kind!r} (known: {', '.join(BACKEND_SETTINGS)})")
        allowed = BACKEND_SETTINGS[kind].model_fields
        unknown = set(values) - set(allowed) if isinstance(values, dict) else set()
        if unknown:
            raise CatalogError(f"{path}: {kind}: unknown setting(s) {sorted(unknown)}; allowed: {', '.join(allowed)}")
    # a kind with every line commented out reads as null
    return validate(BackendSettings, {kind: values or {} for kind, values in data.items()}, path)


def with_backend_settings(spec: ModelSpec, deployment: BaseModel) -> ModelSpec:
    """The model's own settings win; the deployment's settings for its backend kind (a BACKEND_SETTINGS model)
    replace the rest. The entry's own settings stay marked as its own, so a later layer can do the same."""
    values = {**dict(spec), **deployment.model_dump(exclude=spec.model_fields_set)}  # (nested settings stay models)
    return ModelSpec.model_construct(_fields_set=set(spec.model_fields_set), **values)


def load_models(path: Path, backends: Path | None = None) -> dict[str, ModelSpec]:
    """The model registry (resources/models.yaml): {name: ModelSpec}, with the backend settings (by default the
    backends.yaml beside it) applied."""
    path = Path(path)
    data = read_yaml(path) or {}
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise CatalogError(f"{path}: expected a top-level `models:` mapping of name -> settings")
    deployment = load_backend_defaults(backends if backends else backends_file(path))
    models = {}
    for name, body in entries.items():
        spec = validate(ModelSpec, {"name": name, **(body or {})}, path)
        models[name] = with_backend_settings(spec, getattr(deployment, spec.backend))
        register_secret_env(models[name].api_key_env)  # its value is redacted from error text
    return models


def backends_file(models_file: Path) -> Path:
    """The deployment's backend settings live beside its model registry."""
    return Path(models_file).parent / "backends.yaml"


def model_spec(name: str, path: Path) -> ModelSpec:
    models = load_models(path)
    if name not in models:
        raise CatalogError(f"unknown model {name!r}: not in the model registry (known: {', '.join(models)})")
    return models[name]
