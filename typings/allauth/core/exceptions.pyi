# django-allauth ships no types.
from django.http import HttpResponse

class ImmediateHttpResponse(Exception):
    response: HttpResponse
    def __init__(self, response: HttpResponse) -> None: ...
