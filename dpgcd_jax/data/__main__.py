"""`python -m dpgcd_jax.data list` / `python -m dpgcd_jax.data download NAME [NAME ...]`."""

from dpgcd_jax.data._cli import main

if __name__ == "__main__":
  main()
