{
  "targets": [
    {
      "target_name": "malloc_tune",
      "sources": ["src/malloc_tune.c"]
    }
  ]
}
