"""Judging: one model's output judged by another (or by people), the one vocabulary the arena, shadow evaluation and
safety share. A battle is two answers to one question (battles.py); a judge gives a verdict on it in both orders
(judge.py, its prompt a template under assets/templates/); a judged battle is stored as one row shape whatever
names its sides (judged.py); a judge is qualified on battles with a known answer before its verdicts count
(qualification.py). HELM Safety's judges (safety.py: its judge prompts as files, XSTest's refusal string match,
HELM's parsing) judge one answer each, and qualify by their agreement with people (qualification.py). HELM keeps
its own in helm/benchmark/annotation/: a base, a shared model-as-judge, prompts as files. Running a judge model
through its backend and the completion cache is a stage (stages/judging.py)."""
