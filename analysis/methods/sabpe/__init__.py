"""Source-attributed BPE (SA-BPE): BPE trained on code records with per-source attribution (`sabpe`)."""
