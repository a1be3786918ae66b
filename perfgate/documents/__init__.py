"""perfgate's persisted formats: each a typed, versioned model with one reader and one writer
(``perfgate.documents.base``: the compatibility rule)."""
