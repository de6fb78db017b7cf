"""Go behaviour logstore reproduces: quoting, number and duration texts, regexp errors, ip()."""
