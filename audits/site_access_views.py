"""A site's access screen: how the crawler gets into it when it is private.

Owner only (404 for anyone else, as every site URL). Secrets are written here
and never shown again; the page says which kinds are set.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render

from .models.site_access import SiteAccess
from .site_access_forms import SiteAccessForm
from .site_views import site_view


def _access(site) -> SiteAccess:
    return SiteAccess.objects.filter(site=site).first() or SiteAccess(site=site)


@site_view("GET", "POST")
def site_access(request, site):
    access = _access(site)
    form = SiteAccessForm(request.POST or None, access=access, start_url=site.start_url)
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Access saved. The next audit of this site uses it.")
            return redirect("site-access", site_id=site.pk)
        status = 400
    else:
        status = 200
    return render(request, "audits/site_access.html", {"site": site, "access": access, "form": form},
                  status=status)
