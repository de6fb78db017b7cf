"""The built-in web page: static files under ui/static, served by routes/ui.py.

Plain ES modules and one stylesheet, no build step and no third-party code; shipped as package
data so the pyz carries them."""
