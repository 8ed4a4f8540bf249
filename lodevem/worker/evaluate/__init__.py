"""Action ``evaluate`` (``evaluate``: top-1 / top-5 under the row's runtime), the labelled
samples it reads (``samples``) and the ImageFolder trees decoded into them (``images``)."""
