"""The z3 engine over spec/: a symbolic encoding (the package encoding/, one module per area,
written once for concrete and symbolic states with sym.py; the producers in producers.py), its
differential test against spec (differential.py), the invariants (props.py), bounded model
checking (bmc.py) and induction (induction.py) with the strengthening invariants in one place
(strengthen.py)."""
