"""The PostgreSQL + pgvector target: the store, its HNSW candidates, its forget, and the landing tables and local server."""
