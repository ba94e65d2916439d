"""`bouncerctl demo`: a hijacked agent against a helpdesk and a chat server, through the real stack."""
