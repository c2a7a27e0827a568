"""The Semrush simulator's global AI-model catalogue (`GET /v1/ai_models`): the models an AI project can track,
the same for every workspace. `key` is the value Semrush's reporting API expects for a model."""

AI_MODELS = (
    {"id": "2f0c6f3e-5b1a-4d7e-9b64-0c1f3a7d2e01", "key": "chatgpt", "name": "ChatGPT", "icon": None},
    {"id": "7a9e1c24-3d6b-4f08-8e51-6b2d9c4f7a02", "key": "gemini", "name": "Gemini", "icon": None},
    {"id": "c3d58e90-1f4a-4b2c-a7e6-2d8f0b6c9e03", "key": "perplexity", "name": "Perplexity", "icon": None},
    {"id": "e81b4a57-9c2d-4e3f-b0a1-5f7c3d9e2b04", "key": "google_ai_overview", "name": "AI Overviews", "icon": None},
    {"id": "5d2f7b19-8e4c-4a6d-9f30-1b5e8c2a7d05", "key": "google_ai_mode", "name": "AI Mode", "icon": None},
    {"id": "9b6e3d81-2a7f-4c5b-8d14-7e0a6f3b1c06", "key": "copilot", "name": "Copilot", "icon": None},
)
