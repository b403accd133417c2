"""Views for the Look-inside pages: vocabulary search views (`vocab_views`) and the playground (`playground`).

Imports the engine tiers below; no paper method."""
