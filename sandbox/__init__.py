"""The local simulators of the services the product calls (IMS, Semrush, DRS) and of SpaceCat's sign-in.

Installed and mounted under /sandbox/ only in local runs and tests (SANDBOX_ENABLED); they sit above every app
of the product, and none of those imports them: settings and serenity/urls.py name them as strings.
"""
