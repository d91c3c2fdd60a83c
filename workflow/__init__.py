"""The floor above the stages: `invoke all` (which stages run, why one is skipped, the weights policy, the
summary record: :mod:`workflow.plan`, :mod:`workflow.chain`), each stage's settings from config and command line
(:mod:`workflow.stage_settings`), what tasks print (:mod:`workflow.show`), doctor and the Invoke hooks."""
